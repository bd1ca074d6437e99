#ifndef CBENCHLMDB_SHIM_H
#define CBENCHLMDB_SHIM_H
#include <lmdb.h>
#endif
