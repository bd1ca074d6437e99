#ifndef CSTRATA_LMDB_SHIM_H
#define CSTRATA_LMDB_SHIM_H
#include <lmdb.h>
#include <sys/stat.h>

/// The link count of the file open as `fd` (`fstat`'s `st_nlink`), or -1 if it can't be read.
/// In C because Swift, with MemberImportVisibility, finds `struct stat` in whichever clang
/// module first included <sys/stat.h> (Dispatch's, in a release build) and refuses it.
static inline long strata_link_count(int fd) {
    struct stat status;
    if (fstat(fd, &status) != 0) return -1;
    return (long)status.st_nlink;
}
#endif
