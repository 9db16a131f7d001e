# Convenience aliases; the scripts install everything themselves.
.PHONY: run test stop psql package
run:
	bash scripts/run.sh
test:
	bash scripts/test.sh
stop:
	bash scripts/stop.sh
psql:
	bash scripts/psql.sh
# Release artifacts in dist/ for every supported major (PG_VERSIONS="15 18"
# for a subset): tarballs, .debs, SHA256SUMS.
package:
	bash scripts/package.sh
