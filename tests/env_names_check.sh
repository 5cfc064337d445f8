#!/usr/bin/env bash
# Fails when a source or script reads or sets a COLLIE_* variable that the table of base/env.cc does not list
# (as `collie-run --help-env --all` prints it): a new setting without its row, or a user of an old name left
# behind by a rename. env::get() never reads a name outside the table, and a test or script that sets one
# would set nothing. Looked for:
#   C, C++, CUDA and Python sources: a string literal that is a name ("COLLIE_X") or sets one ("COLLIE_X=...");
#   shell scripts, CMake files and .ci/run: NAME=... (an assignment, env, -x, a ctest ENVIRONMENT) and, in
#   shell scripts, $NAME or ${NAME...}.
# $1 = source root, $2 = collie-run.
set -euo pipefail
cd "$1"
run=$2

# COLLIE_* names that are not environment variables of Collie, each with why.
not_collie=(
  COLLIE_BUILD_DIR COLLIE_BUILD_TYPE COLLIE_CMAKE_ARGS  # scripts/setup.sh, test.sh, bench.sh: where and how to build
  COLLIE_STEP_TIMEOUT                                   # scripts/bounded.sh: the wall-clock limit of a CI step
  COLLIE_FUZZ_SECONDS COLLIE_FUZZ_CXX                   # scripts/fuzz.sh
  COLLIE_TEST_UCX COLLIE_BENCH_MPIEXEC COLLIE_FUZZ_TARGET  # compile definitions
  COLLIE_CONFIG_INITIALIZER  # include/collie.h's macro, which error sentences name
  COLLIE_TEST_VAR     # tests/mp/collie_run_test.sh: a variable collie-run -x passes to a shell
  COLLIE_NO_SUCH_VAR  # tests/mp/env_init_test.sh: the unknown variable init must report
)

declare -A known=()
while IFS= read -r name; do known[$name]=1; done < <("$run" --help-env --all | sed -n 's/^  \([A-Z][A-Z0-9_]*\).*/\1/p')
[ ${#known[@]} -gt 0 ] || { echo "FAIL: $run --help-env --all lists no variable"; exit 1; }
for name in "${not_collie[@]}"; do known[$name]=1; done
# CMake options (COLLIE_FAKE_CUDA, COLLIE_DEVICE_CODE, ...), which comments and messages write as NAME=ON.
while IFS= read -r name; do known[$name]=1; done < <(find . -name CMakeLists.txt -not -path './build*' -print0 |
  xargs -0 sed -n 's/^ *option(\(COLLIE_[A-Z0-9_]*\).*/\1/p')

dirs=(base core algorithms executor transport kernels bench tools tests compat include scripts cmake)
bad=0
report() {  # file:line:NAME...
  local file=$1 line=$2 name=$3
  if [ -z "${known[$name]:-}" ]; then
    echo "FAIL: $file:$line: $name is not in the table of base/env.cc (collie-run --help-env --all)"
    bad=1
  fi
}
scan() {  # grep -n -o output: file:line:match
  local file line match
  while IFS=: read -r file line match; do
    [[ $match =~ COLLIE_[A-Z0-9_]*[A-Z0-9] ]] && report "$file" "$line" "${BASH_REMATCH[0]}"
  done
}

scan < <(find "${dirs[@]}" \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.c' \
  -o -name '*.py' \) -print0 2>/dev/null | sort -z |
  xargs -0 grep -HnoE "[\"']COLLIE_[A-Z0-9_]*[A-Z0-9][\"'=]" || true)
mapfile -d '' scripts < <(find "${dirs[@]}" \( -name '*.sh' -o -name 'CMakeLists.txt' -o -name '*.cmake' \) \
  -print0 2>/dev/null | sort -z)
scripts+=(CMakeLists.txt)
mapfile -t scripts < <(printf '%s\n' "${scripts[@]}" | grep -vx 'tests/env_names_check.sh')
[ -f .ci/run ] && scripts+=(.ci/run)
scan < <(grep -HnoE '(^|[^A-Za-z0-9_-])COLLIE_[A-Z0-9_]*[A-Z0-9]=' "${scripts[@]}" || true)
mapfile -t shells < <(printf '%s\n' "${scripts[@]}" | grep -E '\.sh$|^\.ci/run$')
scan < <(grep -HnoE '\$\{?COLLIE_[A-Z0-9_]*[A-Z0-9]' "${shells[@]}" || true)

[ $bad = 0 ] || exit 1
echo "PASS: every COLLIE_* variable the sources and scripts read or set is in the table"
