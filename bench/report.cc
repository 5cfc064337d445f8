// The run's description: command, date, machine and library versions.
#include "bench/report.h"

#include <cuda_runtime_api.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <thread>

#include "bench/buffers.h"
#include "bench/impl.h"
#include "bench/options.h"
#include "collie.h"

namespace collie {
namespace bench {

namespace {

// The value after "key" and a colon or '=' on the first line of `path` that starts with it.
std::string fieldOf(const char* path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    size_t at = line.find_first_of(":=", key.size());
    if (at == std::string::npos) continue;
    std::string v = line.substr(at + 1);
    v.erase(0, v.find_first_not_of(" \t\""));
    while (!v.empty() && (v.back() == '"' || v.back() == ' ')) v.pop_back();
    return v;
  }
  return "";
}

std::string cudaVersionText(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

std::string commandLine(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") ==
                          std::string::npos) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

int Report::limitOf(size_t impl) const {
  for (size_t k = 0; k < limitKinds.size(); ++k)
    if (limitKinds[k] == impls[impl].memory) return static_cast<int>(k);
  return -1;
}

double trafficPercent(const Figure& f, double limit) {
  if (!f.ran || f.traffic < 0 || f.sec <= 0 || limit <= 0) return NAN;
  return f.traffic / f.sec / 1e9 / limit * 100;
}

double floorPercent(const Figure& f, const Row& row, double limit) {
  if (!f.ran || row.floorBytes < 0 || f.sec <= 0 || limit <= 0) return NAN;
  return row.floorBytes / (limit * 1e9) / f.sec * 100;
}

void describeRun(const Options& o, Report* r) {
  r->command = o.launchedAs.empty() ? commandLine(o.argv) : o.launchedAs;
  char date[64];
  const time_t now = time(nullptr);
  tm utc;
  gmtime_r(&now, &utc);
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &utc);
  r->date = date;

  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  utsname u;
  uname(&u);
  std::string os = fieldOf("/etc/os-release", "PRETTY_NAME");
  if (os.empty()) os = u.sysname;
  const std::string memKb = fieldOf("/proc/meminfo", "MemTotal");
  const double memGib = memKb.empty() ? 0 : atof(memKb.c_str()) / (1024.0 * 1024.0);
  char mem[32];
  snprintf(mem, sizeof(mem), "%.1f GiB", memGib);
  r->machine = {
      {"host", host},
      {"cpu", fieldOf("/proc/cpuinfo", "model name")},
      {"cores", std::to_string(std::thread::hardware_concurrency()), true},
      {"memory", mem},
      {"os", os + " (" + u.sysname + " " + u.release + ")"},
      {"gpu", gpuName()},
  };

  int collie = 0, runtime = 0, driver = 0;
  collieGetVersion(&collie);
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  r->versions = {
      {"collie", std::to_string(collie / 10000) + "." + std::to_string((collie / 100) % 100) + "." +
                     std::to_string(collie % 100)},
      {"cuda_runtime", cudaVersionText(runtime)},
      {"cuda_driver", cudaVersionText(driver)},
      {"compiler", __VERSION__},
  };
  if (o.vsNccl) r->versions.push_back({"nccl", ncclVersion().empty() ? "not loaded" : ncclVersion()});
  if (o.vsMpi) r->versions.push_back({"mpi", mpiBuilt() ? mpiVersion() : "not built in"});
}

}  // namespace bench
}  // namespace collie
