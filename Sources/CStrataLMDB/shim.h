#ifndef CSTRATA_LMDB_SHIM_H
#define CSTRATA_LMDB_SHIM_H
#include <lmdb.h>
#endif
