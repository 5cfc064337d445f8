// The table of environment variables (base/env.h): each row well formed, each name of its class's form, and
// no name outside the table ever read. tests/env_names_check.sh holds the sources and scripts to the table;
// tests/env_doc_check.sh holds docs/environment.md to it.
#include "base/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <regex>
#include <set>
#include <string>

namespace collie {
namespace {

using env::VarClass;
using env::VarInfo;

bool startsWith(const char* s, const char* prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

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
    EXPECT_TRUE(std::regex_match(v.name, std::regex("[A-Z][A-Z0-9_]*[A-Z0-9]")));
  }
  for (const std::string& name : kOlderNames) EXPECT_NE(env::find(name.c_str()), nullptr) << name;
}

// One line that says what the variable does now: collie-run wraps it and scripts/env_doc.sh puts it in a table
// cell; where a setting came from belongs in the commit that added it.
TEST(Env, DescriptionsAreOneLineOfTheRule) {
  const std::regex date("20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]");
  const std::regex history("\\b(as before|as until|until 20|since 20|used to)\\b");
  for (const VarInfo& v : env::knownVars()) {
    SCOPED_TRACE(v.name);
    const std::string d = v.description;
    ASSERT_FALSE(d.empty());
    EXPECT_EQ(d.find('\n'), std::string::npos);
    EXPECT_EQ(d.find("  "), std::string::npos) << "collie-run's wrapping keeps single spaces only";
    EXPECT_NE(d.back(), '.');
    EXPECT_FALSE(std::regex_search(d, date));
    EXPECT_FALSE(std::regex_search(d, history));
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
