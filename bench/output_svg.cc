// --plot: busbw against message size as a standalone SVG a person can read:
// log2 size axis with byte units, busbw axis in GB/s (log10 when the figures
// span more than two decades, as they do from 8 B to 64 MiB), grid, title,
// legend, one line per implementation (out-of-place) and a dashed one per
// memory-copy limit.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "bench/options.h"
#include "bench/report.h"

namespace collie {
namespace bench {

namespace {

constexpr double kWidth = 980, kHeight = 600;
constexpr double kLeft = 90, kRight = 250, kTop = 78, kBottom = 72;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

struct Series {
  std::string label;
  std::string color;
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (bytes, GB/s), positive only
};

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string gbpsLabel(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// 1, 2 or 5 times a power of ten, so that about `ticks` steps cover `span`.
double niceStep(double span, int ticks) {
  const double raw = span / ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

bool writeSvg(const Report& r, const std::string& path, std::string* err) {
  // The first type and operator of the run: one plot, one line per implementation.
  std::vector<Series> series;
  const std::string type = r.rows.empty() ? "" : r.rows[0].type, op = r.rows.empty() ? "" : r.rows[0].op;
  size_t color = 0;
  for (size_t i = 0; i < r.impls.size(); ++i) {
    Series s{r.impls[i].label, kColors[color++ % 10], false, {}};
    for (const Row& row : r.rows)
      if (row.type == type && row.op == op && row.impls[i].oop.ran && row.impls[i].oop.busbw > 0)
        s.points.emplace_back(static_cast<double>(row.bytes), row.impls[i].oop.busbw);
    series.push_back(s);
  }
  for (size_t k = 0; k < r.limitKinds.size(); ++k) {
    Series s{"limit: " + r.limitKinds[k] + " memory copy", k == 0 ? "#000000" : "#555555", true, {}};
    for (const Row& row : r.rows)
      if (row.type == type && row.op == op && row.limit[k] > 0)
        s.points.emplace_back(static_cast<double>(row.bytes), row.limit[k]);
    series.push_back(s);
  }
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const Series& s : series) {
    for (const auto& p : s.points) {
      xmin = std::min(xmin, std::log2(p.first));
      xmax = std::max(xmax, std::log2(p.first));
      ymin = std::min(ymin, p.second);
      ymax = std::max(ymax, p.second);
    }
  }
  if (!std::isfinite(xmin)) {
    *err = "--plot: no positive busbw to draw (every size was 0 bytes or skipped)";
    return false;
  }
  xmin = std::floor(xmin);
  xmax = std::ceil(xmax);
  if (xmax - xmin < 1) xmax = xmin + 1;
  const bool logY = ymax / ymin > 100;
  double y0, y1;
  if (logY) {
    y0 = std::floor(std::log10(ymin));
    y1 = std::ceil(std::log10(ymax));
  } else {
    y0 = 0;
    const double step = niceStep(ymax, 6);
    y1 = std::ceil(ymax * 1.05 / step) * step;
  }
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto X = [&](double bytes) { return kLeft + (std::log2(bytes) - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double gbps) {
    const double v = logY ? std::log10(gbps) : gbps;
    return kTop + ph - (v - y0) / (y1 - y0) * ph;
  };

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"Helvetica, Arial, sans-serif\">\n"
    << "<rect x=\"0\" y=\"0\" width=\"" << kWidth << "\" height=\"" << kHeight << "\" fill=\"white\"/>\n";
  o << "<text x=\"" << kWidth / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">"
    << esc(r.title) << "</text>\n";
  std::string sub = "bus bandwidth against message size, out-of-place, " + type + (op == "none" ? "" : " " + op);
  sub += " — " + r.date;
  for (const Setting& s : r.machine)
    if (s.key == "host") sub += ", host " + s.value;
  o << "<text x=\"" << kWidth / 2 << "\" y=\"50\" text-anchor=\"middle\" font-size=\"13\" fill=\"#444\">" << esc(sub)
    << "</text>\n";

  // Grid and tick labels.
  o << "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  const int xs = static_cast<int>(xmax - xmin);
  const int xstep = std::max(1, (xs + 11) / 12);
  // Ticks count down from the largest size, so the end of the sweep is always labelled.
  std::vector<int> xticks;
  for (int e = static_cast<int>(xmax); e >= static_cast<int>(xmin); e -= xstep) xticks.push_back(e);
  for (int e : xticks)
    o << "<line x1=\"" << num(X(std::ldexp(1.0, e))) << "\" y1=\"" << kTop << "\" x2=\"" << num(X(std::ldexp(1.0, e)))
      << "\" y2=\"" << kTop + ph << "\"/>\n";
  std::vector<double> yticks;
  if (logY) {
    for (int d = static_cast<int>(y0); d <= static_cast<int>(y1); ++d) {
      yticks.push_back(std::pow(10.0, d));
      for (double m : {2.0, 5.0})
        if (d < static_cast<int>(y1))
          o << "<line stroke=\"#f0f0f0\" x1=\"" << kLeft << "\" y1=\"" << num(Y(m * std::pow(10.0, d))) << "\" x2=\""
            << kLeft + pw << "\" y2=\"" << num(Y(m * std::pow(10.0, d))) << "\"/>\n";
    }
  } else {
    const double step = niceStep(y1, 6);
    for (double v = 0; v <= y1 + step / 2; v += step) yticks.push_back(v);
  }
  for (double v : yticks)
    o << "<line x1=\"" << kLeft << "\" y1=\"" << num(Y(v)) << "\" x2=\"" << kLeft + pw << "\" y2=\"" << num(Y(v))
      << "\"/>\n";
  o << "</g>\n<g font-size=\"12\" fill=\"#222\">\n";
  for (int e : xticks)
    o << "<text x=\"" << num(X(std::ldexp(1.0, e))) << "\" y=\"" << kTop + ph + 18 << "\" text-anchor=\"middle\">"
      << esc(humanBytes(std::ldexp(1.0, e))) << "</text>\n";
  for (double v : yticks)
    o << "<text x=\"" << kLeft - 8 << "\" y=\"" << num(Y(v) + 4) << "\" text-anchor=\"end\">" << gbpsLabel(v)
      << "</text>\n";
  o << "</g>\n";
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kHeight - 24
    << "\" text-anchor=\"middle\" font-size=\"14\">message size (bytes, log2 scale)</text>\n";
  o << "<text transform=\"translate(24," << kTop + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"14\">busbw (GB/s" << (logY ? ", log10 scale" : "")
    << ")</text>\n";

  // Lines, points and legend.
  double ly = kTop + 10;
  const double lx = kLeft + pw + 20;
  for (const Series& s : series) {
    const std::string dash = s.dashed ? " stroke-dasharray=\"7,5\"" : "";
    if (!s.points.empty()) {
      o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\"" << dash << " points=\"";
      for (const auto& p : s.points) o << num(X(p.first)) << "," << num(Y(p.second)) << " ";
      o << "\"/>\n";
      if (!s.dashed)
        for (const auto& p : s.points)
          o << "<circle cx=\"" << num(X(p.first)) << "\" cy=\"" << num(Y(p.second)) << "\" r=\"3\" fill=\"" << s.color
            << "\"/>\n";
    }
    o << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 28 << "\" y2=\"" << ly << "\" stroke=\""
      << s.color << "\" stroke-width=\"2\"" << dash << "/>\n";
    o << "<text x=\"" << lx + 36 << "\" y=\"" << ly + 4 << "\" font-size=\"13\">" << esc(s.label)
      << (s.points.empty() ? " (no data)" : "") << "</text>\n";
    ly += 22;
  }
  o << "</svg>\n";

  std::ofstream f(path);
  f << o.str();
  f.close();
  if (!f) {
    *err = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace bench
}  // namespace collie
