// The one place that reads environment variables. Every variable Collie reads is a row of the table
// knownVars() returns (env.cc): its name, class, default and a one-line description. `collie-run
// --help-env` prints the table, docs/environment.md is generated from that (scripts/env_doc.sh), a name
// that is not in it reads as unset, and a misspelt COLLIE_* variable is reported once at WARN.
//
// Names follow the class: user settings are COLLIE_*, developer measurement switches COLLIE_DEV_* and
// test settings COLLIE_TEST_* (tests/unit/env_test.cc holds the table to it; tests/env_names_check.sh
// holds every name the sources and scripts read or set to the table).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace collie {
namespace env {

/// Who a variable is for.
enum class VarClass {
  kUser,       // settings for users; `collie-run --help-env` lists these
  kDeveloper,  // measurement switches: they change what the kernels do to measure what a choice costs
  kTest,       // read by Collie's tests and test builds (tests/, the fake CUDA runtime, test modes)
};

/// "user", "developer" or "test".
const char* className(VarClass c);

struct VarInfo {
  const char* name;
  VarClass cls;
  const char* defaultValue;  // as a reader would say it; "" when unset means "none"
  const char* description;   // one line, no trailing period
};

/// Every variable Collie reads, in documentation order.
const std::vector<VarInfo>& knownVars();

/// The row of `name`, or null when the table has none.
const VarInfo* find(const char* name);

/// The raw value of a known variable, or nullopt when unset or empty.
/// A name not in knownVars() is never read: it asserts in debug builds and reads as unset otherwise.
std::optional<std::string> get(const char* name);

/// The text of an integer value: base 10, all of it (leading blanks and a sign allowed, as strtoll);
/// false when malformed or out of the int64 range.
bool parseInt(const std::string& text, int64_t* out);
/// The text of a floating value: all of it, as strtod reads it; false when malformed.
bool parseDouble(const std::string& text, double* out);

/// Integer value; `fallback` when unset. Sets *bad (if given) when the text is not an integer.
int64_t getInt(const char* name, int64_t fallback, bool* bad = nullptr);

/// Floating value (e.g. seconds); `fallback` when unset or malformed (malformed is logged).
double getDouble(const char* name, double fallback);

/// Makes get(name) return `value` while `name` is unset (or empty) in the
/// environment: how the NCCL shim maps NCCL_* variables onto their COLLIE_*
/// equivalents without changing the process's environment, so a COLLIE_*
/// variable the user set still wins. Call before the first get of `name`.
void setFallback(const char* name, const std::string& value);

/// Logs, once per process, every COLLIE_* variable that is set but unknown.
void warnUnknownOnce();

}  // namespace env
}  // namespace collie
