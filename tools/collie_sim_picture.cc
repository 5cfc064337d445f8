#include "tools/collie_sim_picture.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace collie {
namespace sim {

namespace {

// One cell of the picture: what step s of a rank does, in a few characters.
std::string cell(const collie::Step& s) {
  using collie::StepOp;
  const std::string to = std::to_string(s.sendPeer), from = std::to_string(s.recvPeer);
  std::string c;
  switch (s.op) {
    case StepOp::kSend:
      c = ">" + to;
      break;
    case StepOp::kRecv:
      c = "<" + from;
      break;
    case StepOp::kRecvReduceSend:
      c = "<" + from + "+>" + to;
      break;
    case StepOp::kRecvReduceCopy:
      c = "<" + from + "+";
      break;
    case StepOp::kRecvReduceCopySend:
      c = "<" + from + "+=>" + to;
      break;
    case StepOp::kRecvCopySend:
      c = "<" + from + ">" + to;
      break;
    case StepOp::kCopy:
      c = "copy";
      break;
    case StepOp::kCopySend:
      c = "copy>" + to;
      break;
    case StepOp::kReduce:
      c = "red";
      break;
    case StepOp::kSendRecv:
    case StepOp::kSendRecvReduce: {
      const bool plus = s.op == StepOp::kSendRecvReduce;
      if (s.count == 0) {
        c = "<" + from + (plus ? "+" : "");
      } else if (s.recvCount == 0) {
        c = ">" + to;
      } else {
        c = s.sendPeer == s.recvPeer ? "<>" + to + (plus ? "+" : "") : ">" + to + "<" + from + (plus ? "+" : "");
      }
      break;
    }
    case StepOp::kPutPeer:
      c = "put>" + to;
      break;
    case StepOp::kReducePeers:
      c = s.peerCount == 1 ? "get<" + from : "red<" + from + ".." + std::to_string(s.recvPeer + s.peerCount - 1);
      break;
    case StepOp::kBarrier:
      return "====";
  }
  if (s.sent() == 0 && s.received() == 0 && s.count == 0) c = "(" + c + ")";  // moves nothing
  return c;
}

// The picture's columns of direct programs (program.h, "Direct steps"), aligned at the barriers: row k of
// epoch e holds every rank's k-th step of that epoch, so what runs at once lies side by side. Labels each row
// with its epoch ("e1") where it starts, and the barrier rows with "bar".
void alignEpochs(std::vector<std::vector<std::string>>* cells, const std::vector<Program>& programs,
                 std::vector<std::string>* labels) {
  std::vector<std::vector<std::vector<std::string>>> epochs(programs.size());  // [rank][epoch][step]
  size_t most = 0;
  for (size_t r = 0; r < programs.size(); ++r) {
    epochs[r].emplace_back();
    for (const collie::Step& s : programs[r].steps) {
      if (s.op == collie::StepOp::kBarrier) {
        epochs[r].emplace_back();
      } else {
        epochs[r].back().push_back(cell(s));
      }
    }
    most = std::max(most, epochs[r].size());
  }
  cells->assign(programs.size(), {});
  labels->clear();
  for (size_t e = 0; e < most; ++e) {
    size_t rows = 0;
    for (const auto& rank : epochs) rows = std::max(rows, e < rank.size() ? rank[e].size() : 0);
    for (size_t k = 0; k < rows; ++k) {
      labels->push_back(k == 0 ? "e" + std::to_string(e) : "");
      for (size_t r = 0; r < programs.size(); ++r)
        (*cells)[r].push_back(e < epochs[r].size() && k < epochs[r][e].size() ? epochs[r][e][k] : "");
    }
    if (e + 1 == most) break;
    labels->push_back("bar");
    for (size_t r = 0; r < programs.size(); ++r) (*cells)[r].push_back(e + 1 < epochs[r].size() ? "====" : "");
  }
}

}  // namespace

void printPicture(const std::vector<Program>& programs, int only) {
  size_t steps = 0, width = 4;
  std::vector<std::vector<std::string>> cells;
  bool direct = false;
  for (const Program& p : programs) {
    direct = direct || collie::hasDirectSteps(p);
    std::vector<std::string> col;
    for (const collie::Step& s : p.steps) col.push_back(cell(s));
    cells.push_back(col);
  }
  std::vector<std::string> labels;  // row labels of direct programs; else the step numbers
  if (direct) alignEpochs(&cells, programs, &labels);
  for (const std::vector<std::string>& col : cells) {
    for (const std::string& c : col) width = std::max(width, c.size());
    steps = std::max(steps, col.size());
  }
  const int w = static_cast<int>(width) + 1;
  std::printf("%-5s", direct ? "epoch" : "step");
  for (size_t r = 0; r < programs.size(); ++r)
    if (only < 0 || static_cast<int>(r) == only) std::printf(" %*s", w, ("r" + std::to_string(r)).c_str());
  std::printf("\n");
  for (size_t i = 0; i < steps; ++i) {
    std::printf("%-5s", direct ? labels[i].c_str() : std::to_string(i).c_str());
    for (size_t r = 0; r < programs.size(); ++r)
      if (only < 0 || static_cast<int>(r) == only)
        std::printf(" %*s", w, i < cells[r].size() ? cells[r][i].c_str() : "");
    std::printf("\n");
  }
  std::printf(
      "\n>q send to q   <p receive from p   <p>q receive from p, keep and forward to q   <p+>q receive, reduce, "
      "forward\n<p+ receive and reduce into place   <p+=>q receive, reduce into place and forward   >q<p exchange: "
      "send to q while receiving from p\n<>q exchange with q   + marks a reduction; (..) a step that moves no data; "
      "copy/red local copy/reduction\ncopy>q local copy, sent to q from the same read\n");
  if (direct)
    std::printf(
        "put>q store into q's buffer   red<a..b reduce the same range of ranks a..b's buffers, in rank order   get<p "
        "read p's buffer\n==== barrier: the end of an epoch; steps of one epoch run at once (docs/algorithms.md, "
        "\"Direct steps\")\n");
}

}  // namespace sim
}  // namespace collie
