/*
 * credprovider launcher: the executable at the top of a bundle, under every plugin name.
 *
 * The bundle is a directory: this launcher, and _internal/ holding the PyInstaller executable, the
 * interpreter and its libraries. The launcher checks that _internal/ sits next to its real path and
 * that every file listed in _internal/credprovider.files is there with its recorded size, then execs
 * _internal/credprovider-main with the same argv (argv[0] names the plugin). A lone copy of the
 * executable, or a damaged bundle, ends here with one line that says what to install, instead of
 * the bootloader's "Failed to load Python shared library".
 *
 * Built fully static (musl) by release/toolchain.py: it needs nothing from the node, not even glibc.
 * It writes nothing to stdout, so the kubelet never reads a partial response from it.
 */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CREDPROVIDER_VERSION
#define CREDPROVIDER_VERSION "dev"
#endif
#ifndef CREDPROVIDER_ARCH
#define CREDPROVIDER_ARCH "amd64"
#endif

#define CONTENTS "_internal"
#define PROGRAM CONTENTS "/credprovider-main"
#define MANIFEST CONTENTS "/credprovider.files"
#define INSTALL_HINT                                                                        \
    "install the whole credprovider-" CREDPROVIDER_VERSION "/ directory, not one file "   \
    "(tar -xzf credprovider-" CREDPROVIDER_VERSION "-linux-" CREDPROVIDER_ARCH ".tar.gz " \
    "-C /opt), then symlink the plugin names into the kubelet's "                         \
    "--image-credential-provider-bin-dir (see INSTALL in the tarball)"

static const char *name = "credprovider";

/* One line on stderr: "<name>: <what went wrong>; <what to do>", and exit status 1. */
__attribute__((format(printf, 1, 2))) static int fail(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fprintf(stderr, "%s: ", name);
    vfprintf(stderr, format, args);
    fprintf(stderr, "; " INSTALL_HINT "\n");
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
    snprintf(path, sizeof path, "%s/%s", dir, MANIFEST);
    FILE *manifest = fopen(path, "r");
    if (manifest == NULL) {
        return fail("the bundle is damaged: cannot read %s (%s)", path, strerror(errno));
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
        } else if (stat(file, &info) != 0) {
            status = fail("the bundle is damaged: %s is missing (%s)", file, strerror(errno));
        } else if ((long long)info.st_size != size) {
            status = fail("the bundle is damaged: %s has %lld bytes, not %lld", file,
                          (long long)info.st_size, size);
        }
    }
    fclose(manifest);
    return status;
}

int main(int argc, char **argv)
{
    (void)argc;
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
    /* The bootloader itself links libz.so.1, which the bundle carries: let the loader find it there
     * (the bootloader then puts _internal/ first on the path for Python, as it always does). */
    const char *old = getenv("LD_LIBRARY_PATH");
    char *path = malloc(strlen(contents) + (old ? strlen(old) + 2 : 1));
    if (path == NULL) {
        return fail("out of memory");
    }
    strcpy(path, contents);
    if (old != NULL && old[0] != '\0') {
        strcat(path, ":");
        strcat(path, old);
    }
    setenv("LD_LIBRARY_PATH", path, 1);
    snprintf(program, sizeof program, "%s/%s", dir, PROGRAM);
    execv(program, argv);
    return fail("cannot start %s (%s)", program, strerror(errno));
}
