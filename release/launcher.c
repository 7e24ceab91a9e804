/*
 * credprovider launcher: the executable at the top of a bundle, under every plugin name.
 *
 * The bundle is a directory: this launcher, and _internal/ holding the PyInstaller executable, the
 * interpreter and its libraries. The launcher checks that _internal/ sits next to its real path and
 * that every file listed in _internal/credprovider.files is there with its recorded size, then execs
 * _internal/credprovider with the same argv (argv[0] names the plugin). A lone copy of the
 * executable, or a damaged bundle, ends here with one line that says what to install, instead of
 * the bootloader's "Failed to load Python shared library".
 *
 * Built fully static (musl) by release/toolchain.py: it needs nothing from the node, not even glibc.
 * It writes nothing to stdout, so the kubelet never reads a partial response from it.
 */
#include <errno.h>
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
#define PROGRAM CONTENTS "/credprovider"
#define MANIFEST CONTENTS "/credprovider.files"
#define INSTALL_HINT                                                                        \
    "install the whole credprovider-" CREDPROVIDER_VERSION "/ directory, not one file "   \
    "(tar -xzf credprovider-" CREDPROVIDER_VERSION "-linux-" CREDPROVIDER_ARCH ".tar.gz " \
    "-C /opt), then symlink the plugin names into the kubelet's "                         \
    "--image-credential-provider-bin-dir (see INSTALL in the tarball)"

static const char *name = "credprovider";

static int fail(const char *what, const char *path, const char *detail)
{
    fprintf(stderr, "%s: %s %s%s%s; " INSTALL_HINT "\n", name, what, path, detail[0] ? ": " : "", detail);
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
    char path[PATH_MAX], line[PATH_MAX + 32], detail[96];
    snprintf(path, sizeof path, "%s/%s", dir, MANIFEST);
    FILE *manifest = fopen(path, "r");
    if (manifest == NULL) {
        return fail("is a damaged bundle: cannot read", path, strerror(errno));
    }
    int status = 0;
    while (status == 0 && fgets(line, sizeof line, manifest) != NULL) {
        char *end = NULL;
        long long size = strtoll(line, &end, 10);
        if (end == line || *end != ' ') {
            status = fail("is a damaged bundle: bad line in", path, "");
            break;
        }
        char *relative = end + 1;
        relative[strcspn(relative, "\n")] = '\0';
        char file[PATH_MAX];
        struct stat info;
        if (snprintf(file, sizeof file, "%s/%s/%s", dir, CONTENTS, relative) >= (int)sizeof file) {
            status = fail("is a damaged bundle: path too long:", relative, "");
        } else if (stat(file, &info) != 0) {
            status = fail("is a damaged bundle: missing", file, strerror(errno));
        } else if ((long long)info.st_size != size) {
            snprintf(detail, sizeof detail, "%lld bytes, %lld expected", (long long)info.st_size, size);
            status = fail("is a damaged bundle: wrong size of", file, detail);
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
        return fail("cannot find its own path", "(/proc/self/exe is unreadable)", strerror(errno));
    }
    struct stat info;
    snprintf(contents, sizeof contents, "%s/%s", dir, CONTENTS);
    if (stat(contents, &info) != 0 || !S_ISDIR(info.st_mode)) {
        return fail("is one part of a bundle, and its directory is missing:", contents, "");
    }
    if (check_manifest(dir) != 0) {
        return 1;
    }
    snprintf(program, sizeof program, "%s/%s", dir, PROGRAM);
    execv(program, argv);
    return fail("cannot start", program, strerror(errno));
}
