// The one place that reads environment variables. Every variable Collie reads is
// listed in kEnvVars (env.cc) with a one-line description, so `collie-run --help-env`
// and docs can print them, and a misspelt COLLIE_* variable is reported once at WARN.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace collie {
namespace env {

struct VarInfo {
  const char* name;
  const char* description;
};

/// Every variable Collie reads, in documentation order.
const std::vector<VarInfo>& knownVars();

/// The raw value of a known variable, or nullopt when unset or empty.
/// Asking for a name not in knownVars() is a programming error (aborts in debug builds).
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
