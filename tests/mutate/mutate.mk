# mutate.mk — `make mutate`: mutation testing (tests/mutate/mutate.py over tests/mutate/mutations.txt).
# Included by the top-level Makefile. Not part of `make test`: it rebuilds a scratch copy of the tree
# (build/mutate/tree) once per mutation and runs the tests named for each; about 15-25 minutes on 2 cores.
# Exits non-zero if a mutation survived, is stale (its original text no longer occurs exactly once) or
# does not build. `tests/mutate/mutate.py --only NAME,...` runs a few.
.PHONY: mutate
mutate: deps
	@scripts/install-deps.sh test
	@scripts/setup-venv.sh >/dev/null
	tests/mutate/mutate.py
