// The table of environment variables (base/env.h): each row well formed, each name of its class's form, and
// no name outside the table ever read. tests/env_names_check.sh holds the sources and scripts to the table;
// tests/env_doc_check.sh holds docs/environment.md to it.
#include "base/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <set>
#include <string>

namespace collie {
namespace {

using env::VarClass;
using env::VarInfo;

bool startsWith(const char* s, const char* prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

// [A-Z][A-Z0-9_]*[A-Z0-9]. (Not std::regex: GCC 12's <regex> fails -Werror=maybe-uninitialized in the
// sanitizer builds.)
bool isVariableName(const std::string& n) {
  auto upper = [](char c) { return c >= 'A' && c <= 'Z'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (n.size() < 2 || !upper(n.front()) || !(upper(n.back()) || digit(n.back()))) return false;
  for (char c : n)
    if (!upper(c) && !digit(c) && c != '_') return false;
  return true;
}

// Whether `d` holds a date, 20YY-MM-DD.
bool hasDate(const std::string& d) {
  auto digits = [&](size_t at, size_t n) {
    for (size_t k = at; k < at + n; ++k)
      if (d[k] < '0' || d[k] > '9') return false;
    return true;
  };
  for (size_t i = 0; i + 10 <= d.size(); ++i)
    if (d.compare(i, 2, "20") == 0 && digits(i + 2, 2) && d[i + 4] == '-' && digits(i + 5, 2) && d[i + 7] == '-' &&
        digits(i + 8, 2))
      return true;
  return false;
}

// Names that keep an older form than their class's: each one a deliberate exception, listed here so that a new
// variable cannot become one by accident.
const std::set<std::string> kOlderNames = {
    "COLLIE_KERNEL_TIMING",  // a developer switch, named before COLLIE_DEV_* and announced under this name
};

TEST(Env, EveryNameIsListedOnce) {
  std::set<std::string> seen;
  for (const VarInfo& v : env::knownVars()) EXPECT_TRUE(seen.insert(v.name).second) << v.name << " is listed twice";
}

TEST(Env, NamesFollowTheirClass) {
  for (const VarInfo& v : env::knownVars()) {
    SCOPED_TRACE(v.name);
    const bool older = kOlderNames.count(v.name) > 0;
    // COLLIE_DEV_* exactly for the developer class and COLLIE_TEST_* for the test class, the older names aside.
    EXPECT_EQ(startsWith(v.name, "COLLIE_DEV_"), v.cls == VarClass::kDeveloper && !older);
    EXPECT_EQ(startsWith(v.name, "COLLIE_TEST_"), v.cls == VarClass::kTest && !older);
    // Variables of others (CUDA, Open MPI, Slurm) are read, never set, and only as user settings.
    EXPECT_TRUE(startsWith(v.name, "COLLIE_") || v.cls == VarClass::kUser);
    EXPECT_TRUE(isVariableName(v.name));
  }
  for (const std::string& name : kOlderNames) EXPECT_NE(env::find(name.c_str()), nullptr) << name;
}

// One line that says what the variable does now: collie-run wraps it and scripts/env_doc.sh puts it in a table
// cell; where a setting came from belongs in the commit that added it.
TEST(Env, DescriptionsAreOneLineOfTheRule) {
  for (const VarInfo& v : env::knownVars()) {
    SCOPED_TRACE(v.name);
    const std::string d = v.description;
    ASSERT_FALSE(d.empty());
    EXPECT_EQ(d.find('\n'), std::string::npos);
    EXPECT_EQ(d.find("  "), std::string::npos) << "collie-run's wrapping keeps single spaces only";
    EXPECT_NE(d.back(), '.');
    EXPECT_FALSE(hasDate(d));
    for (const char* history : {"as before", "as until", "until 20", "since 20", "used to"})
      EXPECT_EQ(d.find(history), std::string::npos) << history;
    EXPECT_EQ(std::string(v.defaultValue).find('\n'), std::string::npos);
  }
}

TEST(Env, ClassNames) {
  EXPECT_STREQ(env::className(VarClass::kUser), "user");
  EXPECT_STREQ(env::className(VarClass::kDeveloper), "developer");
  EXPECT_STREQ(env::className(VarClass::kTest), "test");
}

TEST(Env, FindsOnlyListedNames) {
  ASSERT_NE(env::find("COLLIE_DEBUG"), nullptr);
  EXPECT_STREQ(env::find("COLLIE_DEBUG")->name, "COLLIE_DEBUG");
  EXPECT_EQ(env::find("COLLIE_"), nullptr);
  EXPECT_EQ(env::find("collie_debug"), nullptr);
}

// A name outside the table is never read: a debug build stops at the assertion, any other reads it as unset.
// (The name is put together here so that tests/env_names_check.sh does not take it for one the tests set.)
TEST(Env, NameOutsideTheTableReadsAsUnset) {
  const std::string name = std::string("COLLIE_") + "NOT_IN_THE_TABLE";
  ASSERT_EQ(env::find(name.c_str()), nullptr);
  ASSERT_EQ(setenv(name.c_str(), "7", 1), 0);
  EXPECT_DEBUG_DEATH(EXPECT_FALSE(env::get(name.c_str()).has_value()), "not in knownVars");
  EXPECT_DEBUG_DEATH(EXPECT_EQ(env::getInt(name.c_str(), 3), 3), "not in knownVars");
  unsetenv(name.c_str());
}

TEST(Env, ReadsAListedName) {
  ASSERT_EQ(setenv("COLLIE_SPIN_POLLS", "12", 1), 0);
  EXPECT_EQ(env::get("COLLIE_SPIN_POLLS").value_or(""), "12");
  EXPECT_EQ(env::getInt("COLLIE_SPIN_POLLS", 0), 12);
  ASSERT_EQ(setenv("COLLIE_SPIN_POLLS", "", 1), 0);
  EXPECT_FALSE(env::get("COLLIE_SPIN_POLLS").has_value()) << "empty reads as unset";
  unsetenv("COLLIE_SPIN_POLLS");
  EXPECT_EQ(env::getInt("COLLIE_SPIN_POLLS", 5), 5);
}

}  // namespace
}  // namespace collie
