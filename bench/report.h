// What one collie-bench run measured, kept by rank 0 for the writers: the
// stdout table (output_table.cc), JSON and CSV (output_files.cc) and the SVG
// plot (output_svg.cc). Settings, machine and versions are key/value lists so
// every writer carries all of them without knowing each one.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace collie {
namespace bench {

struct Options;

struct Setting {
  std::string key, value;
  bool number = false;  // written without quotes in JSON
};

/// One measurement: a placement (out-of-place or in-place) of one implementation at one size.
struct Figure {
  bool ran = false;
  std::string why;                       // why it did not run
  double sec = 0, algbw = 0, busbw = 0;  // sec: per call (with --reps, the median loop's)
  double p90 = 0;                        // seconds per call of the 90th-percentile loop (--reps; else sec)
  // Host seconds per call spent inside the call itself (its enqueue: checks, waits, launches; no sync), the
  // median loop's, reduced over ranks as `sec` is; negative: not measured (CUDA graphs).
  double issue = -1;
  long long wrong = -1;  // -1: not checked (-c 0)
  // Collie: the most bytes any rank's program reads and writes in memory per call (algorithms/memory_traffic.h);
  // negative: not known (baselines, send/recv).
  double traffic = -1;
  // Collie: the algorithm its communicator ran ("copy" for one rank's copy); empty when not known (baselines).
  std::string algorithm;
};

/// Traffic moved per second as a percentage of `limit` (GB/s): how close the kernels come to the copy bandwidth
/// for the algorithm they run. NaN when the figure or the traffic is missing.
double trafficPercent(const Figure& f, double limit);

struct ImplFigures {
  Figure oop, ip;
};

struct Row {
  size_t bytes = 0, count = 0;
  std::string type, op;
  int root = -1;
  std::vector<ImplFigures> impls;    // in the order of Report::impls
  double bareOop = -1, bareIp = -1;  // seconds of the bare loop; negative: not measured
  std::vector<double> limit;         // GB/s (bytes read + written) per Report::limitKinds
  double floorBytes = -1;            // the byte floor per rank (cases.h, floorBytes); negative: none
};

/// The byte floor's time (row.floorBytes at `limit` GB/s) as a percentage of the figure's: 100 is the floor. NaN
/// when the figure, the floor or the limit is missing.
double floorPercent(const Figure& f, const Row& row, double limit);

struct ImplDesc {
  std::string label;
  bool baseline = false;
  std::string memory;  // "host" or "device": which limit its percentage uses
};

struct InitRow {
  std::string path;
  double initMinMs = 0, initAvgMs = 0, initMaxMs = 0, destroyAvgMs = 0;
  double hostBytes = -1, deviceBytes = -1;  // per rank; negative: unknown
  std::string note;
};

struct Report {
  std::string command, date, title;
  std::vector<Setting> settings, machine, versions;
  std::vector<std::string> notes;  // lines printed as "# note: ..." (baselines that could not run, ...)

  std::vector<ImplDesc> impls;
  std::vector<std::string> limitKinds;
  bool bare = false;
  std::vector<Row> rows;
  std::vector<InitRow> initRows;

  long long totalWrong = 0;
  double busbwSum = 0;
  int busbwCount = 0;

  /// Index in `limitKinds` of implementation i's memory, or -1.
  int limitOf(size_t impl) const;
  /// The implementation the ratio columns divide by: the first one.
  static constexpr size_t kReference = 0;
};

/// A command line a shell would run again: words with odd characters in single quotes.
std::string commandLine(const std::vector<std::string>& words);

/// Fills command, date, machine and versions; the caller adds settings.
void describeRun(const Options& o, Report* r);

// Writers. Table lines go to `out` as the run goes (rank 0 only).
void printTableHeader(const Report& r, FILE* out);
void printTableRow(const Report& r, const Row& row, FILE* out);
void printTableFooter(const Report& r, FILE* out);
void printInitTable(const Report& r, FILE* out);
/// --summary: per size range, Collie against each baseline and the copy limit (output_summary.cc).
void printSummary(const Report& r, FILE* out);
bool writeJson(const Report& r, const std::string& path, std::string* err);
/// --jsonl: the run's notes and versions, a line each (after the last row).
bool appendJsonNotes(const Report& r, const std::string& path, std::string* err);
/// --jsonl: one line per figure of `row` (implementation and placement), appended to `path` as the rows go.
bool appendJsonLines(const Report& r, const Row& row, const std::string& path, std::string* err);
bool writeCsv(const Report& r, const std::string& path, std::string* err);
bool writeSvg(const Report& r, const std::string& path, std::string* err);

}  // namespace bench
}  // namespace collie
