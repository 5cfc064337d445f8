// --json and --csv: every figure of the run with its settings, machine,
// versions and command. JSON nests (rows -> implementations -> placements);
// CSV is one flat table, one line per (size, implementation, placement), with
// the run's settings repeated as leading columns so each line stands alone.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench/report.h"

namespace collie {
namespace bench {

namespace {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// JSON has no NaN or infinity: those become null.
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string settingsObject(const std::vector<Setting>& list) {
  std::string out = "{";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ", ";
    out += jsonString(list[i].key) + ": " + (list[i].number ? list[i].value : jsonString(list[i].value));
  }
  return out + "}";
}

std::string figureObject(const Figure& f) {
  if (!f.ran) return "{\"skipped\": " + jsonString(f.why) + "}";
  return "{\"time_us\": " + num(f.sec * 1e6) + ", \"p90_us\": " + num(f.p90 * 1e6) +
         ", \"algbw_gbps\": " + num(f.algbw) + ", \"busbw_gbps\": " + num(f.busbw) +
         ", \"wrong\": " + (f.wrong < 0 ? std::string("null") : std::to_string(f.wrong)) +
         ", \"traffic_bytes_per_rank\": " + num(f.traffic < 0 ? NAN : f.traffic) +
         (f.issue < 0 ? std::string() : ", \"issue_us\": " + num(f.issue * 1e6)) +
         (f.algorithm.empty() ? std::string() : ", \"algorithm\": " + jsonString(f.algorithm)) + "}";
}

double ratio(const Figure& base, const Figure& ref) {
  return base.ran && ref.ran && ref.sec > 0 ? base.sec / ref.sec : NAN;
}

double percent(const Figure& f, double limit) { return f.ran && limit > 0 ? f.busbw / limit * 100 : NAN; }

std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csvNum(double v) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// Writes `text` to `path`, replacing it or, with `append`, after what it holds.
bool save(const std::string& path, const std::string& text, std::string* err, bool append = false) {
  std::ofstream f(path, append ? std::ios::app : std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    *err = (append ? "cannot append to " : "cannot write ") + path;
    return false;
  }
  return true;
}

}  // namespace

bool writeJson(const Report& r, const std::string& path, std::string* err) {
  std::ostringstream o;
  o << "{\n  \"tool\": \"collie-bench\",\n  \"format\": 1,\n";
  o << "  \"command\": " << jsonString(r.command) << ",\n  \"date\": " << jsonString(r.date) << ",\n";
  o << "  \"title\": " << jsonString(r.title) << ",\n";
  o << "  \"settings\": " << settingsObject(r.settings) << ",\n";
  o << "  \"machine\": " << settingsObject(r.machine) << ",\n";
  o << "  \"versions\": " << settingsObject(r.versions) << ",\n";
  o << "  \"notes\": [";
  for (size_t i = 0; i < r.notes.size(); ++i) o << (i ? ", " : "") << jsonString(r.notes[i]);
  o << "],\n  \"implementations\": [";
  for (size_t i = 0; i < r.impls.size(); ++i)
    o << (i ? ", " : "") << "{\"label\": " << jsonString(r.impls[i].label)
      << ", \"baseline\": " << (r.impls[i].baseline ? "true" : "false")
      << ", \"memory\": " << jsonString(r.impls[i].memory) << "}";
  o << "],\n  \"reference\": " << jsonString(r.impls.empty() ? "" : r.impls[Report::kReference].label);
  o << ",\n  \"limit_memory\": [";
  for (size_t i = 0; i < r.limitKinds.size(); ++i) o << (i ? ", " : "") << jsonString(r.limitKinds[i]);
  o << "],\n  \"rows\": [";
  for (size_t ri = 0; ri < r.rows.size(); ++ri) {
    const Row& row = r.rows[ri];
    o << (ri ? ",\n" : "\n") << "    {\"size\": " << row.bytes << ", \"count\": " << row.count
      << ", \"type\": " << jsonString(row.type) << ", \"redop\": " << jsonString(row.op) << ", \"root\": " << row.root
      << ",\n     \"results\": {";
    for (size_t i = 0; i < r.impls.size(); ++i)
      o << (i ? ", " : "") << jsonString(r.impls[i].label) << ": {\"out_of_place\": " << figureObject(row.impls[i].oop)
        << ", \"in_place\": " << figureObject(row.impls[i].ip) << "}";
    o << "}";
    const Figure& refOop = row.impls[Report::kReference].oop;
    const Figure& refIp = row.impls[Report::kReference].ip;
    o << ",\n     \"time_ratio_to_reference\": {";
    for (size_t i = 0; i < r.impls.size(); ++i)
      o << (i ? ", " : "") << jsonString(r.impls[i].label)
        << ": {\"out_of_place\": " << num(ratio(row.impls[i].oop, refOop))
        << ", \"in_place\": " << num(ratio(row.impls[i].ip, refIp)) << "}";
    o << "}";
    if (r.bare)
      o << ",\n     \"bare_us\": {\"out_of_place\": " << num(row.bareOop < 0 ? NAN : row.bareOop * 1e6)
        << ", \"in_place\": " << num(row.bareIp < 0 ? NAN : row.bareIp * 1e6) << "}";
    if (!r.limitKinds.empty()) {
      o << ",\n     \"limit_gbps\": {";
      for (size_t k = 0; k < r.limitKinds.size(); ++k)
        o << (k ? ", " : "") << jsonString(r.limitKinds[k]) << ": " << num(row.limit[k]);
      // Per implementation, out of place and in place, a percentage of its memory's limit.
      auto percents = [&](const char* key, double (*of)(const Figure&, double)) {
        o << "},\n     \"" << key << "\": {";
        for (size_t i = 0; i < r.impls.size(); ++i) {
          const int k = r.limitOf(i);
          const double l = k >= 0 ? row.limit[static_cast<size_t>(k)] : 0;
          o << (i ? ", " : "") << jsonString(r.impls[i].label)
            << ": {\"out_of_place\": " << num(of(row.impls[i].oop, l))
            << ", \"in_place\": " << num(of(row.impls[i].ip, l)) << "}";
        }
      };
      percents("busbw_percent_of_limit", percent);
      percents("traffic_percent_of_limit", trafficPercent);
      o << "},\n     \"floor_percent\": {";
      for (size_t i = 0; i < r.impls.size(); ++i) {
        const int k = r.limitOf(i);
        const double l = k >= 0 ? row.limit[static_cast<size_t>(k)] : 0;
        o << (i ? ", " : "") << jsonString(r.impls[i].label)
          << ": {\"out_of_place\": " << num(floorPercent(row.impls[i].oop, row, l))
          << ", \"in_place\": " << num(floorPercent(row.impls[i].ip, row, l)) << "}";
      }
      o << "}";
    }
    o << "}";
  }
  o << (r.rows.empty() ? "],\n" : "\n  ],\n") << "  \"init\": [";
  for (size_t i = 0; i < r.initRows.size(); ++i) {
    const InitRow& x = r.initRows[i];
    o << (i ? "," : "") << "\n    {\"path\": " << jsonString(x.path) << ", \"init_ms_min\": " << num(x.initMinMs)
      << ", \"init_ms_avg\": " << num(x.initAvgMs) << ", \"init_ms_max\": " << num(x.initMaxMs)
      << ", \"destroy_ms_avg\": " << num(x.destroyAvgMs)
      << ", \"host_bytes_per_rank\": " << num(x.hostBytes < 0 ? NAN : x.hostBytes)
      << ", \"device_bytes_per_rank\": " << num(x.deviceBytes < 0 ? NAN : x.deviceBytes)
      << ", \"note\": " << jsonString(x.note) << "}";
  }
  o << (r.initRows.empty() ? "],\n" : "\n  ],\n");
  o << "  \"summary\": {\"wrong\": " << r.totalWrong
    << ", \"avg_busbw_gbps\": " << num(r.busbwCount ? r.busbwSum / r.busbwCount : 0.0) << "}\n}\n";
  return save(path, o.str(), err);
}

namespace {

// The settings every JSON line repeats, so that each stands alone.
std::string jsonLineLead(const Report& r) {
  std::string lead = "{\"tool\": \"collie-bench\"";
  for (const char* key :
       {"collective", "nranks", "threads_per_process", "ranks_per_thread", "backend", "graph_iters", "reps"})
    for (const Setting& s : r.settings)
      if (s.key == key) lead += ", " + jsonString(s.key) + ": " + (s.number ? s.value : jsonString(s.value));
  return lead;
}

}  // namespace

bool appendJsonNotes(const Report& r, const std::string& path, std::string* err) {
  std::string text;
  for (const std::string& note : r.notes) text += jsonLineLead(r) + ", \"note\": " + jsonString(note) + "}\n";
  for (const Setting& v : r.versions)
    text += jsonLineLead(r) + ", \"version\": " + jsonString(v.key) + ", \"value\": " + jsonString(v.value) + "}\n";
  return save(path, text, err, true);
}

bool appendJsonLines(const Report& r, const Row& row, const std::string& path, std::string* err) {
  std::string lead = jsonLineLead(r);
  lead += ", \"size\": " + std::to_string(row.bytes) + ", \"count\": " + std::to_string(row.count) +
          ", \"type\": " + jsonString(row.type) + ", \"redop\": " + jsonString(row.op);
  std::ostringstream o;
  for (size_t i = 0; i < r.impls.size(); ++i) {
    const int k = r.limitOf(i);
    const double l = k >= 0 && static_cast<size_t>(k) < row.limit.size() ? row.limit[static_cast<size_t>(k)] : 0;
    for (int ip = 0; ip < 2; ++ip) {
      const Figure& f = ip ? row.impls[i].ip : row.impls[i].oop;
      o << lead << ", \"implementation\": " << jsonString(r.impls[i].label)
        << ", \"placement\": " << (ip ? "\"in_place\"" : "\"out_of_place\"") << ", \"figure\": " << figureObject(f)
        << ", \"limit_gbps\": " << num(l > 0 ? l : NAN)
        << ", \"floor_us\": " << num(row.floorBytes >= 0 && l > 0 ? row.floorBytes / (l * 1e9) * 1e6 : NAN)
        << ", \"floor_percent\": " << num(floorPercent(f, row, l)) << "}\n";
    }
  }
  return save(path, o.str(), err, true);
}

bool writeCsv(const Report& r, const std::string& path, std::string* err) {
  std::vector<std::string> keys, values;
  auto add = [&](const std::string& prefix, const std::vector<Setting>& list) {
    for (const Setting& s : list) {
      keys.push_back(prefix + s.key);
      values.push_back(csvField(s.value));
    }
  };
  keys = {"date", "command"};
  values = {csvField(r.date), csvField(r.command)};
  add("", r.settings);
  add("machine_", r.machine);
  add("version_", r.versions);
  std::string lead, head;
  for (size_t i = 0; i < keys.size(); ++i) {
    head += (i ? "," : "") + keys[i];
    lead += (i ? "," : "") + values[i];
  }
  std::ostringstream o;
  if (!r.initRows.empty()) {
    o << head << ",path,init_ms_min,init_ms_avg,init_ms_max,destroy_ms_avg,host_bytes_per_rank,device_bytes_per_rank,"
      << "note\n";
    for (const InitRow& x : r.initRows)
      o << lead << "," << csvField(x.path) << "," << csvNum(x.initMinMs) << "," << csvNum(x.initAvgMs) << ","
        << csvNum(x.initMaxMs) << "," << csvNum(x.destroyAvgMs) << "," << csvNum(x.hostBytes < 0 ? NAN : x.hostBytes)
        << "," << csvNum(x.deviceBytes < 0 ? NAN : x.deviceBytes) << "," << csvField(x.note) << "\n";
    return save(path, o.str(), err);
  }
  o << head << ",size,count,type,redop,root,implementation,baseline,placement,time_us,algbw_gbps,busbw_gbps,wrong,"
    << "skipped,time_ratio_to_reference,bare_us,limit_gbps,busbw_percent_of_limit,traffic_bytes_per_rank,"
    << "traffic_percent_of_limit,algorithm\n";
  for (const Row& row : r.rows) {
    for (size_t i = 0; i < r.impls.size(); ++i) {
      for (int ip = 0; ip < 2; ++ip) {
        const Figure& f = ip ? row.impls[i].ip : row.impls[i].oop;
        const Figure& ref = ip ? row.impls[Report::kReference].ip : row.impls[Report::kReference].oop;
        const int k = r.limitOf(i);
        const double limit = k >= 0 ? row.limit[static_cast<size_t>(k)] : NAN;
        const double bare = i == Report::kReference && r.bare ? (ip ? row.bareIp : row.bareOop) : -1;
        o << lead << "," << row.bytes << "," << row.count << "," << row.type << "," << row.op << "," << row.root << ","
          << csvField(r.impls[i].label) << "," << (r.impls[i].baseline ? 1 : 0) << ","
          << (ip ? "in_place" : "out_of_place") << "," << (f.ran ? csvNum(f.sec * 1e6) : "") << ","
          << (f.ran ? csvNum(f.algbw) : "") << "," << (f.ran ? csvNum(f.busbw) : "") << ","
          << (f.ran && f.wrong >= 0 ? std::to_string(f.wrong) : "") << "," << csvField(f.ran ? "" : f.why) << ","
          << csvNum(ratio(f, ref)) << "," << csvNum(bare < 0 ? NAN : bare * 1e6) << "," << csvNum(limit) << ","
          << csvNum(percent(f, limit)) << "," << csvNum(f.ran && f.traffic >= 0 ? f.traffic : NAN) << ","
          << csvNum(trafficPercent(f, limit)) << "," << csvField(f.ran ? f.algorithm : "") << "\n";
      }
    }
  }
  return save(path, o.str(), err);
}

}  // namespace bench
}  // namespace collie
