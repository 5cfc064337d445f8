// The stdout table. Its first columns are nccl-tests' own (size, count, type,
// redop, root, then time, algbw, busbw, #wrong out-of-place and in-place), so
// scripts that read nccl-tests output read the first implementation's figures.
// Further column groups follow: one per other implementation, the baselines'
// time ratios, the bare loop, and the memory-copy limit.
#include <cstring>

#include "bench/report.h"

namespace collie {
namespace bench {

namespace {

struct Column {
  std::string group, name, unit;
  int width;
};

std::string fmt(const char* f, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// Only the first implementation's figures feed the ratio and average lines.
const Figure& refFigure(const Row& row, bool inPlace) {
  return inPlace ? row.impls[Report::kReference].ip : row.impls[Report::kReference].oop;
}

std::vector<Column> columns(const Report& r) {
  std::vector<Column> cols = {{"", "size", "(B)", 12},
                              {"", "count", "(elements)", 12},
                              {"", "type", "", 8},
                              {"", "redop", "", 6},
                              {"", "root", "", 6}};
  for (const ImplDesc& d : r.impls) {
    for (const char* place : {"out-of-place", "in-place"}) {
      const std::string g = r.impls.size() > 1 ? d.label + " " + place : place;
      cols.push_back({g, "time", "(us)", 10});
      cols.push_back({g, "algbw", "(GB/s)", 8});
      cols.push_back({g, "busbw", "(GB/s)", 8});
      cols.push_back({g, "#wrong", "", 6});
    }
  }
  for (const ImplDesc& d : r.impls) {
    if (!d.baseline) continue;
    const std::string g = d.label + "/" + r.impls[Report::kReference].label + " time";
    cols.push_back({g, "oop", "(x)", 8});
    cols.push_back({g, "ip", "(x)", 8});
  }
  if (r.bare) {
    const std::string g = "bare loop of " + r.impls[Report::kReference].label;
    cols.push_back({g, "oop", "(us)", 10});
    cols.push_back({g, "ip", "(us)", 10});
  }
  if (!r.limitKinds.empty()) {
    for (const std::string& k : r.limitKinds) cols.push_back({"limit", k, "(GB/s)", 9});
    for (const ImplDesc& d : r.impls) {
      const std::string g = "% of limit" + (r.impls.size() > 1 ? ": " + d.label : std::string());
      cols.push_back({g, "oop", "(%)", 7});
      cols.push_back({g, "ip", "(%)", 7});
    }
    for (const ImplDesc& d : r.impls) {
      if (d.baseline) continue;
      const std::string g = "traffic" + (r.impls.size() > 1 ? ": " + d.label : std::string());
      cols.push_back({g, "oop", "(B/rank)", 12});
      cols.push_back({g, "oop", "(% lim)", 7});
      cols.push_back({g, "ip", "(% lim)", 7});
    }
  }
  // A group's title fits over its columns with a space to spare ("% of limit: collie:ring" is wider than two
  // percentages): the group's columns widen, shared out evenly, rather than the title being cut.
  for (size_t i = 0; i < cols.size();) {
    size_t j = i;
    int span = 0;
    while (j < cols.size() && cols[j].group == cols[i].group) span += 1 + cols[j++].width;
    const int lack = static_cast<int>(cols[i].group.size()) + 1 - span;
    for (size_t k = i; lack > 0 && k < j; ++k)
      cols[k].width += lack / static_cast<int>(j - i) + (k - i < static_cast<size_t>(lack) % (j - i) ? 1 : 0);
    i = j;
  }
  return cols;
}

void printCells(const std::vector<Column>& cols, const std::vector<std::string>& cells, const char* lead, FILE* out) {
  std::string line = lead;
  for (size_t i = 0; i < cols.size(); ++i) {
    char buf[128];
    snprintf(buf, sizeof(buf), " %*s", cols[i].width, i < cells.size() ? cells[i].c_str() : "");
    line += buf;
  }
  fprintf(out, "%s\n", line.c_str());
}

void figureCells(const Figure& f, std::vector<std::string>* cells) {
  if (!f.ran) {
    cells->insert(cells->end(), {"n/a", "-", "-", "-"});
    return;
  }
  cells->push_back(fmt("%.2f", f.sec * 1e6));
  cells->push_back(fmt("%.3f", f.algbw));
  cells->push_back(fmt("%.3f", f.busbw));
  cells->push_back(f.wrong < 0 ? "N/A" : std::to_string(f.wrong));
}

std::string ratioCell(const Figure& base, const Figure& ref) {
  if (!base.ran || !ref.ran || ref.sec <= 0) return "-";
  return fmt("%.2f", base.sec / ref.sec);
}

std::string percentCell(const Figure& f, double limit) {
  if (!f.ran || limit <= 0) return "-";
  return fmt("%.1f", f.busbw / limit * 100);
}

std::string trafficCell(const Figure& f, double limit) {
  const double p = trafficPercent(f, limit);
  return p == p ? fmt("%.1f", p) : "-";
}

}  // namespace

void printTableHeader(const Report& r, FILE* out) {
  fprintf(out, "# %s\n", r.title.c_str());
  for (const std::string& n : r.notes) fprintf(out, "# note: %s\n", n.c_str());
  const std::vector<Column> cols = columns(r);
  // Group titles, each over the columns it spans (or starting there when longer).
  std::string groups = "#";
  size_t i = 0;
  while (i < cols.size()) {
    size_t j = i;
    int width = 0;
    while (j < cols.size() && cols[j].group == cols[i].group) width += 1 + cols[j++].width;
    std::string g = cols[i].group;
    if (static_cast<int>(g.size()) < width) {
      const size_t left = (static_cast<size_t>(width) - g.size()) / 2;
      g = std::string(left, ' ') + g + std::string(static_cast<size_t>(width) - g.size() - left, ' ');
    }
    groups += g.substr(0, static_cast<size_t>(width));
    i = j;
  }
  while (!groups.empty() && groups.back() == ' ') groups.pop_back();
  fprintf(out, "#\n%s\n", groups.c_str());
  std::vector<std::string> names, units;
  for (const Column& c : cols) {
    names.push_back(c.name);
    units.push_back(c.unit);
  }
  printCells(cols, names, "#", out);
  printCells(cols, units, "#", out);
  fflush(out);
}

void printTableRow(const Report& r, const Row& row, FILE* out) {
  std::vector<std::string> cells = {std::to_string(row.bytes), std::to_string(row.count), row.type, row.op,
                                    std::to_string(row.root)};
  for (const ImplFigures& f : row.impls) {
    figureCells(f.oop, &cells);
    figureCells(f.ip, &cells);
  }
  for (size_t i = 0; i < r.impls.size(); ++i) {
    if (!r.impls[i].baseline) continue;
    cells.push_back(ratioCell(row.impls[i].oop, refFigure(row, false)));
    cells.push_back(ratioCell(row.impls[i].ip, refFigure(row, true)));
  }
  if (r.bare) {
    cells.push_back(row.bareOop < 0 ? "-" : fmt("%.2f", row.bareOop * 1e6));
    cells.push_back(row.bareIp < 0 ? "-" : fmt("%.2f", row.bareIp * 1e6));
  }
  if (!r.limitKinds.empty()) {
    for (double l : row.limit) cells.push_back(l > 0 ? fmt("%.2f", l) : "-");
    for (size_t i = 0; i < r.impls.size(); ++i) {
      const int k = r.limitOf(i);
      const double limit = k >= 0 ? row.limit[static_cast<size_t>(k)] : 0;
      cells.push_back(percentCell(row.impls[i].oop, limit));
      cells.push_back(percentCell(row.impls[i].ip, limit));
    }
    for (size_t i = 0; i < r.impls.size(); ++i) {
      if (r.impls[i].baseline) continue;
      const int k = r.limitOf(i);
      const double limit = k >= 0 ? row.limit[static_cast<size_t>(k)] : 0;
      const Figure& oop = row.impls[i].oop;
      cells.push_back(oop.ran && oop.traffic >= 0 ? fmt("%.0f", oop.traffic) : "-");
      cells.push_back(trafficCell(oop, limit));
      cells.push_back(trafficCell(row.impls[i].ip, limit));
    }
  }
  printCells(columns(r), cells, " ", out);
  fflush(out);
}

namespace {

// With the tuner and several algorithms side by side (--algo all): per size, what the tuner picked and which
// algorithm was fastest, out of place. The wide table holds the same figures, one column group per algorithm,
// too wide to read; this is the question `tests/gpu/run.sh tune` asks of it.
void printPicks(const Report& r, FILE* out) {
  size_t tuner = r.impls.size();
  std::vector<size_t> algos;
  for (size_t i = 0; i < r.impls.size(); ++i) {
    if (r.impls[i].baseline || r.impls[i].label.rfind("collie:", 0) != 0) continue;
    if (r.impls[i].label == "collie:tuner")
      tuner = i;
    else if (r.impls[i].label != "collie:tuner+direct")  // a tuner too (auto_direct), not an algorithm
      algos.push_back(i);
  }
  if (tuner == r.impls.size() || algos.size() < 2) return;
  fprintf(out,
          "# Picks, out of place: the tuner's algorithm, the fastest of the %zu algorithms measured, and the "
          "tuner's time over the fastest's (each a separate measurement: within a few %% is noise).\n",
          algos.size());
  fprintf(out, "# %12s  %-12s %-12s %14s\n", "size (B)", "tuner", "fastest", "tuner/fastest");
  for (const Row& row : r.rows) {
    const Figure& t = row.impls[tuner].oop;
    const Figure* best = nullptr;
    size_t bestImpl = 0;
    for (size_t i : algos) {
      const Figure& f = row.impls[i].oop;
      if (f.ran && f.wrong <= 0 && f.sec > 0 && (best == nullptr || f.sec < best->sec)) {
        best = &f;
        bestImpl = i;
      }
    }
    if (!t.ran || best == nullptr) continue;
    const std::string fastest = r.impls[bestImpl].label.substr(7);  // after "collie:"
    fprintf(out, "# %12zu  %-12s %-12s %14.2f\n", row.bytes, t.algorithm.empty() ? "?" : t.algorithm.c_str(),
            fastest.c_str(), t.sec / best->sec);
  }
}

}  // namespace

void printTableFooter(const Report& r, FILE* out) {
  fprintf(out, "# Out of bounds values : %lld %s\n", r.totalWrong, r.totalWrong == 0 ? "OK" : "FAILED");
  fprintf(out, "# Avg bus bandwidth    : %.4f GB/s (%s)\n", r.busbwCount ? r.busbwSum / r.busbwCount : 0.0,
          r.impls.empty() ? "" : r.impls[Report::kReference].label.c_str());
  bool anyBaseline = false;
  for (const ImplDesc& d : r.impls) anyBaseline = anyBaseline || d.baseline;
  if (anyBaseline)
    fprintf(out, "# Ratio columns: the baseline's time over %s's; above 1, %s is faster.\n",
            r.impls[Report::kReference].label.c_str(), r.impls[Report::kReference].label.c_str());
  if (!r.limitKinds.empty())
    fprintf(out,
            "# Limit: memory-copy bandwidth per rank with all ranks copying at once, bytes read + written; "
            "%% of limit = busbw / limit (a transfer through memory reads and writes each byte at least once).\n"
            "# Traffic: the most bytes one rank's program reads and writes in memory per call (its own and its "
            "peers' slots and buffers included, the Simple protocol's count, sends read in place counted so; "
            "docs/PERFORMANCE.md); %% lim = traffic / time / limit, how close the kernels come to the copy "
            "bandwidth for the algorithm they run.\n");
  printPicks(r, out);
  fprintf(out, "#\n");
  fflush(out);
}

void printInitTable(const Report& r, FILE* out) {
  fprintf(out, "# %s\n", r.title.c_str());
  for (const std::string& n : r.notes) fprintf(out, "# note: %s\n", n.c_str());
  fprintf(out, "# %-34s %9s %9s %9s %11s %14s %14s\n", "path", "init min", "init avg", "init max", "destroy avg",
          "host bytes", "device bytes");
  fprintf(out, "# %-34s %9s %9s %9s %11s %14s %14s\n", "", "(ms)", "(ms)", "(ms)", "(ms)", "(per rank)", "(per rank)");
  for (const InitRow& row : r.initRows) {
    auto bytes = [](double b) { return b < 0 ? std::string("-") : fmt("%.0f", b); };
    fprintf(out, "  %-34s %9.2f %9.2f %9.2f %11.2f %14s %14s\n", row.path.c_str(), row.initMinMs, row.initAvgMs,
            row.initMaxMs, row.destroyAvgMs, bytes(row.hostBytes).c_str(), bytes(row.deviceBytes).c_str());
    if (!row.note.empty()) fprintf(out, "#   %s\n", row.note.c_str());
  }
  fprintf(out, "#\n");
  fflush(out);
}

}  // namespace bench
}  // namespace collie
