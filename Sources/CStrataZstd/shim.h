#ifndef CSTRATA_ZSTD_SHIM_H
#define CSTRATA_ZSTD_SHIM_H
#include <zstd.h>
#include <zstd_errors.h>
#include <zdict.h>
#endif
