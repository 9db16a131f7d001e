/*
 * The executor floor of the benchmarks: a C function that returns a
 * constant. Declared VOLATILE like snowflake_nextval(), it goes through
 * exactly the same call machinery (executor setup, the EXECUTE privilege
 * check, fmgr, one call per row), so the difference to a generator is the
 * generator's own work. Built and loaded only by bench/run.sh and
 * bench/profile.sh; it is not part of the extension.
 */
#include "postgres.h"
#include "fmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(bench_floor);

Datum
bench_floor(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(42);
}
