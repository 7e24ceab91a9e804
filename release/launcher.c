/*
 * credprovider launcher: the executable at the top of a bundle, under every plugin name.
 *
 * The bundle is a directory: this launcher, and _internal/ holding the interpreter (credprovider-main,
 * CPython's own python3.11), its libraries, the glibc it runs on (its loader included:
 * release/glibc.py) and the program as bytecode (release/layout.py). The launcher checks that
 * _internal/ sits next to its real path and that every file start-up needs (listed in
 * _internal/credprovider.start) is there with its recorded size, then execs the interpreter, through
 * the bundle's own loader, on _internal/credprovider-boot.py with the same arguments (argv[0], which
 * names the plugin, passed on). A lone copy of the executable, or a bundle missing what start-up
 * needs, ends here with one line that says what to install, instead of the loader's "cannot open
 * shared object file". The rest of the bundle (a thousand files, 3 ms a check) is checked only after
 * a start has failed, by the boot script and the plugins' error edge: per exec the cost stays the
 * same however many files the bundle holds.
 *
 * Built fully static (musl) by release/toolchain.py, and the interpreter brings its own glibc: the
 * bundle needs no libc from the node at all (Talos, Alpine, distroless roots).
 * It writes nothing to stdout, so the kubelet never reads a partial response from it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CREDPROVIDER_LOADER
#define CREDPROVIDER_LOADER "ld-linux-x86-64.so.2"
#endif

#define CONTENTS "_internal"
/* The files start-up needs, each "<size> <path relative to _internal/>" (release/bundle.py); the
 * rest of the bundle is checked after a start fails (credprovider/runtime/bundlecheck.py). */
#define LOADER CONTENTS "/" CREDPROVIDER_LOADER
#define PROGRAM CONTENTS "/credprovider-main"
#define BOOT CONTENTS "/credprovider-boot.py"
#ifndef CREDPROVIDER_MANIFEST
#define CREDPROVIDER_MANIFEST "credprovider.start"
#endif
/* What a lone copy or a damaged bundle is told to do: release/bundle.py passes the text
 * credprovider/runtime/bundlecheck.py says after a failed start, so both say the same. */
#ifndef CREDPROVIDER_INSTALL_HINT
#define CREDPROVIDER_INSTALL_HINT "install the whole credprovider bundle directory, not one file"
#endif

static const char *name = "credprovider";

/* One line on stderr: "<name>: <what went wrong>; <what to do>", and exit status 1. */
__attribute__((format(printf, 1, 2))) static int fail(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fprintf(stderr, "%s: ", name);
    vfprintf(stderr, format, args);
    fprintf(stderr, "; %s\n", CREDPROVIDER_INSTALL_HINT);
    va_end(args);
    return 1;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The directory holding this executable's real file (symlinks resolved). */
static int own_directory(const char *argv0, char *out)
{
    char self[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length > 0) {
        self[length] = '\0';
    } else if (strchr(argv0, '/') == NULL || realpath(argv0, self) == NULL) {
        return -1;
    }
    char *slash = strrchr(self, '/');
    if (slash == NULL) {
        return -1;
    }
    *slash = '\0';
    if (snprintf(out, PATH_MAX, "%s", self[0] ? self : "/") >= PATH_MAX) {
        return -1;
    }
    return 0;
}

/* Every "<size> <relative path>" line of the manifest must match a file of that size. */
static int check_manifest(const char *dir)
{
    char path[PATH_MAX], line[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s/%s", dir, CONTENTS, CREDPROVIDER_MANIFEST);
    FILE *manifest = fopen(path, "r");
    if (manifest == NULL) {
        return fail("the bundle is damaged: cannot read %s (%s)", path, strerror(errno));
    }
    /* Each file is looked up relative to _internal/ (one path walk, not one per file). */
    char contents_path[PATH_MAX];
    snprintf(contents_path, sizeof contents_path, "%s/%s", dir, CONTENTS);
    int contents = open(contents_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (contents < 0) {
        fclose(manifest);
        return fail("the bundle is damaged: cannot open %s (%s)", contents_path, strerror(errno));
    }
    int status = 0;
    while (status == 0 && fgets(line, sizeof line, manifest) != NULL) {
        char *end = NULL;
        long long size = strtoll(line, &end, 10);
        if (end == line || *end != ' ') {
            status = fail("the bundle is damaged: %s has a bad line", path);
            break;
        }
        char *relative = end + 1;
        relative[strcspn(relative, "\n")] = '\0';
        char file[PATH_MAX];
        struct stat info;
        if (snprintf(file, sizeof file, "%s/%s/%s", dir, CONTENTS, relative) >= (int)sizeof file) {
            status = fail("the bundle is damaged: path too long: %s", relative);
        } else if (fstatat(contents, relative, &info, 0) != 0) {
            status = fail("the bundle is damaged: %s is missing (%s)", file, strerror(errno));
        } else if ((long long)info.st_size != size) {
            status = fail("the bundle is damaged: %s has %lld bytes, not %lld", file,
                          (long long)info.st_size, size);
        }
    }
    close(contents);
    fclose(manifest);
    return status;
}

int main(int argc, char **argv)
{
    if (argv[0] != NULL && argv[0][0] != '\0') {
        name = base_name(argv[0]);
    }
    char dir[PATH_MAX], contents[PATH_MAX], program[PATH_MAX];
    if (own_directory(argv[0] ? argv[0] : "", dir) != 0) {
        return fail("cannot find its own path (/proc/self/exe: %s)", strerror(errno));
    }
    struct stat info;
    snprintf(contents, sizeof contents, "%s/%s", dir, CONTENTS);
    if (stat(contents, &info) != 0 || !S_ISDIR(info.st_mode)) {
        return fail("%s is missing: this executable is one part of the credprovider bundle", contents);
    }
    if (check_manifest(dir) != 0) {
        return 1;
    }
    /* The interpreter runs through the bundle's own glibc loader, which finds libpython, OpenSSL
     * and glibc itself in _internal/ only (--library-path; --inhibit-cache: not through the node's
     * /etc/ld.so.cache): the node's libc, if it has one, is never used, and no LD_LIBRARY_PATH is
     * set for the programs the tool runs. The loader ignores a node's LD_LIBRARY_PATH too.
     * <loader> --inhibit-cache --library-path _internal credprovider-main
     *     -I (no PYTHON* variables, no user site) -S (no site module) -B (never write bytecode)
     *     credprovider-boot.py <argv[0]> <args>: the boot script restores argv, dispatches on argv[0]. */
    char boot[PATH_MAX], loader[PATH_MAX];
    snprintf(loader, sizeof loader, "%s/%s", dir, LOADER);
    snprintf(program, sizeof program, "%s/%s", dir, PROGRAM);
    snprintf(boot, sizeof boot, "%s/%s", dir, BOOT);
    char **args = calloc((size_t)argc + 10, sizeof *args);
    if (args == NULL) {
        return fail("out of memory");
    }
    int count = 0;
    args[count++] = loader;
    args[count++] = "--inhibit-cache";
    args[count++] = "--library-path";
    args[count++] = contents;
    args[count++] = program;
    args[count++] = "-I";
    args[count++] = "-S";
    args[count++] = "-B";
    args[count++] = boot;
    args[count++] = (argv[0] != NULL && argv[0][0] != '\0') ? argv[0] : (char *)name;
    for (int i = 1; i < argc; i++) {
        args[count++] = argv[i];
    }
    args[count] = NULL;
    execv(loader, args);
    return fail("cannot start %s (%s)", loader, strerror(errno));
}
