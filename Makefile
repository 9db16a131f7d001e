# Convenience aliases; the scripts install everything themselves.
.PHONY: run test stop
run:
	bash scripts/run.sh
test:
	bash scripts/test.sh
stop:
	bash scripts/stop.sh
