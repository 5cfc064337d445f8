// MSCCL XML import (algorithms/msccl_xml.h): algorithms written as MSCCL writes them load as program files, prove
// with the verifier, give Collie's own ring where they are its schedule, and run exactly through communicators
// (COLLIE_ALGO=COLLECTIVE:file:PATH) against the independent references of the sweeps, in place and out of
// place. A file Collie cannot express, or that is not a valid MSCCL algorithm, is refused with a sentence that
// names the file and the place, never a crash.
#include "algorithms/msccl_xml.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "algorithms/program_file.h"
#include "algorithms/registry.h"
#include "algorithms/verify_sweep.h"
#include "collie.h"
#include "common/coll_map.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"

namespace collie {
namespace {

using test::ScopedEnv;

// One <step>, as msccl-tools writes them: the side a type does not use names the peer's buffer or -1.
std::string step(int s, const char* type, const char* srcbuf, int srcoff, const char* dstbuf, int dstoff, int cnt = 1,
                 int depid = -1, int deps = -1) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "      <step s=\"%d\" type=\"%s\" srcbuf=\"%s\" srcoff=\"%d\" dstbuf=\"%s\" dstoff=\"%d\" cnt=\"%d\" "
                "depid=\"%d\" deps=\"%d\" hasdep=\"0\"/>\n",
                s, type, srcbuf, srcoff, dstbuf, dstoff, cnt, depid, deps);
  return line;
}

struct Ring {
  int n = 4;
  int channels = 1;
  bool fused = true;     // the reduction completes in an rrcs; else an rrc, then an s
  bool inPlace = false;  // inplace="1" outofplace="0", every range in the input, as msccl-tools writes in place
};

// A ring allreduce as MSCCL's ring files are: per channel one tb that sends to the next rank and receives from
// the previous; reduce-scatter with s, rrs and rrcs (or rrc and s), then allgather with rcs and r. Channel ch
// carries chunks ch * n .. ch * n + n - 1.
std::string ringAllReduce(const Ring& o) {
  const int n = o.n, total = n * o.channels;
  const char* out = o.inPlace ? "i" : "o";
  std::string x = "<algo name=\"ring\" proto=\"Simple\" nchannels=\"" + std::to_string(o.channels) +
                  "\" nchunksperloop=\"" + std::to_string(total) + "\" ngpus=\"" + std::to_string(n) +
                  "\" coll=\"allreduce\" inplace=\"" + (o.inPlace ? "1" : "0") + "\" outofplace=\"" +
                  (o.inPlace ? "0" : "1") + "\" minBytes=\"0\" maxBytes=\"0\">\n";
  for (int r = 0; r < n; ++r) {
    x += "  <gpu id=\"" + std::to_string(r) + "\" i_chunks=\"" + std::to_string(total) + "\" o_chunks=\"" +
         (o.inPlace ? "0" : std::to_string(total)) + "\" s_chunks=\"0\">\n";
    for (int ch = 0; ch < o.channels; ++ch) {
      auto c = [&](int i) { return ch * n + ((i % n) + n) % n; };
      x += "    <tb id=\"" + std::to_string(ch) + "\" send=\"" + std::to_string((r + 1) % n) + "\" recv=\"" +
           std::to_string((r + n - 1) % n) + "\" chan=\"" + std::to_string(ch) + "\">\n";
      int s = 0;
      x += step(s++, "s", "i", c(r - 1), "i", -1);
      for (int j = 1; j <= n - 2; ++j) x += step(s++, "rrs", "i", c(r - 1 - j), "i", -1);
      if (o.fused) {
        x += step(s++, "rrcs", "i", c(r), out, c(r));
      } else {
        x += step(s++, "rrc", "i", c(r), out, c(r));
        x += step(s++, "s", out, c(r), "o", -1);
      }
      for (int m = 1; m <= n - 2; ++m) x += step(s++, "rcs", "o", -1, out, c(r - m));
      x += step(s++, "r", "o", -1, out, c(r + 1));
      x += "    </tb>\n";
    }
    x += "  </gpu>\n";
  }
  return x + "</algo>\n";
}

// A ring reduce_scatter on n ranks: rank r ends with block r. In place only, the result stays in the input, as
// msccl-tools writes an in-place reduce_scatter.
std::string ringReduceScatter(int n, bool inPlace) {
  std::string x = "<algo name=\"rs_ring\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"" + std::to_string(n) +
                  "\" ngpus=\"" + std::to_string(n) + "\" coll=\"reduce_scatter\" inplace=\"" + (inPlace ? "1" : "0") +
                  "\">\n";
  for (int r = 0; r < n; ++r) {
    auto c = [&](int i) { return ((i % n) + n) % n; };
    x += "  <gpu id=\"" + std::to_string(r) + "\" i_chunks=\"" + std::to_string(n) + "\" o_chunks=\"" +
         (inPlace ? "0" : "1") + "\" s_chunks=\"0\">\n";
    x += "    <tb id=\"0\" send=\"" + std::to_string(c(r + 1)) + "\" recv=\"" + std::to_string(c(r - 1)) +
         "\" chan=\"0\">\n";
    int s = 0;
    x += step(s++, "s", "i", c(r - 1), "i", -1);
    for (int j = 1; j <= n - 2; ++j) x += step(s++, "rrs", "i", c(r - 1 - j), "i", -1);
    x += step(s++, "rrc", "i", c(r), inPlace ? "i" : "o", inPlace ? c(r) : 0);
    x += "    </tb>\n  </gpu>\n";
  }
  return x + "</algo>\n";
}

// Allgather on 3 ranks over two channels, with cross-tb dependencies: tb 0 copies the rank's input into its
// block of the output; on each channel one tb receives the previous rank's half-blocks and one forwards them, each
// send waiting (depid, deps) for the copy or the receive that put its data in place. Channel 1's sender starts
// with a nop that carries its wait.
const char* const kAllGatherTwoChannels = R"(<?xml version="1.0"?>
<!-- a hand-written allgather: 3 gpus, 2 channels, 6 chunks per loop (2 per rank) -->
<algo name="ag_deps" proto="LL128" nchannels="2" nchunksperloop="6" ngpus="3" coll="allgather" inplace="0">
  <gpu id="0" i_chunks="2" o_chunks="6" s_chunks="0">
    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="1" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="0" deps="0" hasdep="0"/>
      <step s="1" type="s" srcbuf="o" srcoff="4" dstbuf="o" dstoff="4" cnt="1" depid="2" deps="0" hasdep="0"/>
    </tb>
    <tb id="2" send="-1" recv="2" chan="0">
      <step s="0" type="r" srcbuf="o" srcoff="4" dstbuf="o" dstoff="4" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="r" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="3" send="1" recv="-1" chan="1">
      <step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0"/>
      <step s="1" type="s" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="s" srcbuf="o" srcoff="5" dstbuf="o" dstoff="5" cnt="1" depid="4" deps="0" hasdep="0"/>
    </tb>
    <tb id="4" send="-1" recv="2" chan="1">
      <step s="0" type="r" srcbuf="o" srcoff="5" dstbuf="o" dstoff="5" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="r" srcbuf="o" srcoff="3" dstbuf="o" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="6" s_chunks="0">
    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="2" cnt="2" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="1" send="2" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="1" depid="0" deps="0" hasdep="0"/>
      <step s="1" type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="2" deps="0" hasdep="0"/>
    </tb>
    <tb id="2" send="-1" recv="0" chan="0">
      <step s="0" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="r" srcbuf="o" srcoff="4" dstbuf="o" dstoff="4" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="3" send="2" recv="-1" chan="1">
      <step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0"/>
      <step s="1" type="s" srcbuf="o" srcoff="3" dstbuf="o" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="s" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="4" deps="0" hasdep="0"/>
    </tb>
    <tb id="4" send="-1" recv="0" chan="1">
      <step s="0" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="r" srcbuf="o" srcoff="5" dstbuf="o" dstoff="5" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="2" i_chunks="2" o_chunks="6" s_chunks="0">
    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="4" cnt="2" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="1" send="0" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="o" srcoff="4" dstbuf="o" dstoff="4" cnt="1" depid="0" deps="0" hasdep="0"/>
      <step s="1" type="s" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="1" depid="2" deps="0" hasdep="0"/>
    </tb>
    <tb id="2" send="-1" recv="1" chan="0">
      <step s="0" type="r" srcbuf="o" srcoff="2" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="3" send="0" recv="-1" chan="1">
      <step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0"/>
      <step s="1" type="s" srcbuf="o" srcoff="5" dstbuf="o" dstoff="5" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="s" srcbuf="o" srcoff="3" dstbuf="o" dstoff="3" cnt="1" depid="4" deps="0" hasdep="0"/>
    </tb>
    <tb id="4" send="-1" recv="1" chan="1">
      <step s="0" type="r" srcbuf="o" srcoff="3" dstbuf="o" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
)";

// All-to-all on 3 ranks: each rank copies its own block with cpy (in a tb on no channel, as msccl-tools writes
// local tbs) and exchanges the others with one tb per peer.
const char* const kAllToAll = R"(<algo name="a2a" proto="Simple" nchannels="1" nchunksperloop="3" ngpus="3"
    coll="alltoall" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="3" o_chunks="3" s_chunks="0">
    <tb id="0" send="-1" recv="-1" chan="-1">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="2" send="2" recv="2" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="2" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="3" o_chunks="3" s_chunks="0">
    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="2" send="2" recv="2" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="2" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="2" i_chunks="3" o_chunks="3" s_chunks="0">
    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="2" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="2" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="2" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="2" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
)";

// An in-place-only allgather as TACOS-style generators write them: no input buffer (i_chunks 0), each rank's own
// block already in place in the output, sent to each peer by the tb that also receives the peer's block.
std::string inPlaceAllGather(int n) {
  std::string x = "<algo name=\"ag_inplace\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"" + std::to_string(n) +
                  "\" ngpus=\"" + std::to_string(n) +
                  "\" coll=\"allgather\" inplace=\"1\" outofplace=\"0\" minBytes=\"0\" maxBytes=\"0\">\n";
  for (int r = 0; r < n; ++r) {
    x += "  <gpu id=\"" + std::to_string(r) + "\" i_chunks=\"0\" o_chunks=\"" + std::to_string(n) +
         "\" s_chunks=\"0\">\n";
    int id = 0;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      x += "    <tb id=\"" + std::to_string(id++) + "\" send=\"" + std::to_string(p) + "\" recv=\"" +
           std::to_string(p) + "\" chan=\"0\">\n";
      x += step(0, "s", "o", r, "o", r);
      x += step(1, "r", "o", p, "o", p);
      x += "    </tb>\n";
    }
    x += "  </gpu>\n";
  }
  return x + "</algo>\n";
}

ProgramFile load(const std::string& xml, const std::string& path = "test.xml") {
  ProgramFile f;
  const Status st = parseMscclXml(xml, path, &f);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << xml;
  return f;
}

void expectProved(const ProgramFile& f, const std::string& what) {
  std::string counts;
  const Status st = verifyProgramFile(f, what, &counts);
  EXPECT_TRUE(st.ok()) << what << ": " << st.message();
  for (const Program& p : f.programs) EXPECT_EQ(p.algorithm, f.name) << what;
}

TEST(MscclXml, RingAllReduceIsCollieRing) {
  const ProgramFile f = load(ringAllReduce(Ring{}));
  EXPECT_EQ(f.collective, Collective::kAllReduce);
  EXPECT_EQ(f.name, "ring");
  EXPECT_EQ(f.nranks, 4);
  EXPECT_EQ(f.chunks, 4u);
  expectProved(f, "ring.xml");
  // The schedule is Collie's own ring allreduce, step for step, at every count the chunks divide.
  const AlgorithmInfo* ring = findAlgorithm(Collective::kAllReduce, "ring");
  ASSERT_NE(ring, nullptr);
  for (uint64_t count : {4, 8, 20}) {
    std::vector<Program> got;
    ASSERT_TRUE(programsForCount(f, count, &got).ok());
    const std::vector<Program> want = buildPrograms(*ring, 4, count, count, 0, 0);
    for (int r = 0; r < 4; ++r)
      EXPECT_TRUE(sameSteps(got[static_cast<size_t>(r)].steps, want[static_cast<size_t>(r)].steps))
          << "count " << count << ", rank " << r << "\nimported:\n"
          << got[static_cast<size_t>(r)].describe() << "\nbuilt-in:\n"
          << want[static_cast<size_t>(r)].describe();
  }
}

// minBytes/maxBytes bound the calls the file serves, both ends included; maxBytes 0 is no bound, as in MSCCL.
TEST(MscclXml, MinAndMaxBytesBoundTheCallsServed) {
  EXPECT_EQ(load(ringAllReduce(Ring{})).maxBytes, UINT64_MAX);  // maxBytes="0"
  std::string x = ringAllReduce(Ring{});
  x.replace(x.find("minBytes=\"0\" maxBytes=\"0\""), 25, "minBytes=\"1024\" maxBytes=\"65536\"");
  const ProgramFile f = load(x);
  EXPECT_EQ(f.minBytes, 1024u);
  EXPECT_EQ(f.maxBytes, 65536u);
  EXPECT_FALSE(fileServes(f, 1023));
  EXPECT_TRUE(fileServes(f, 65536));
  EXPECT_FALSE(fileServes(f, 65537));
  x.replace(x.find("minBytes=\"1024\""), 15, "minBytes=\"99999\"");
  ProgramFile bad;
  const Status st = parseMscclXml(x, "range.xml", &bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("maxBytes 65536 is below minBytes 99999"), std::string::npos) << st.message();
}

// proto becomes the file's protocol: Simple and LL their own, LL128 (which Collie lacks) Collie's choice by size.
TEST(MscclXml, ProtoIsTheFilesProtocol) {
  for (const auto& [proto, protocol] : {std::pair<const char*, FileProtocol>{"Simple", FileProtocol::kSimple},
                                        {"LL", FileProtocol::kLL},
                                        {"LL128", FileProtocol::kAuto}}) {
    std::string x = ringAllReduce(Ring{});
    x.replace(x.find("proto=\"Simple\""), 14, std::string("proto=\"") + proto + "\"");
    EXPECT_EQ(load(x).protocol, protocol) << proto;
  }
}

TEST(MscclXml, RingVariantsProve) {
  for (int n : {2, 3, 4, 5}) {
    Ring o;
    o.n = n;
    for (int variant = 0; variant < 4; ++variant) {
      o.fused = (variant & 1) != 0;
      o.channels = (variant & 2) != 0 ? 2 : 1;
      o.inPlace = false;
      expectProved(load(ringAllReduce(o)), "ring n=" + std::to_string(n) + " variant " + std::to_string(variant));
      o.inPlace = true;
      expectProved(load(ringAllReduce(o)),
                   "in-place ring n=" + std::to_string(n) + " variant " + std::to_string(variant));
    }
    expectProved(load(ringReduceScatter(n, false)), "reduce_scatter ring n=" + std::to_string(n));
    expectProved(load(ringReduceScatter(n, true)), "in-place reduce_scatter ring n=" + std::to_string(n));
    expectProved(load(inPlaceAllGather(n)), "in-place allgather n=" + std::to_string(n));
  }
}

TEST(MscclXml, TwoChannelsAndDependencies) {
  const ProgramFile f = load(kAllGatherTwoChannels);
  EXPECT_EQ(f.collective, Collective::kAllGather);
  EXPECT_EQ(f.chunks, 2u);  // 6 chunks per loop over 3 ranks' blocks
  expectProved(f, "ag_deps.xml");
  // Rank 0 copies first (every send waits for it), and forwards each half-block only after receiving it.
  const std::vector<Step>& s = f.programs[0].steps;
  ASSERT_EQ(s.size(), 9u) << f.programs[0].describe();
  EXPECT_EQ(s[0].op, StepOp::kCopy);
  EXPECT_EQ(s[0].count, 2u);
  for (const Step& st : s) EXPECT_FALSE(st.finalize);
}

TEST(MscclXml, AllToAllWithCopy) {
  const ProgramFile f = load(kAllToAll);
  EXPECT_EQ(f.collective, Collective::kAllToAll);
  EXPECT_EQ(f.chunks, 1u);
  expectProved(f, "a2a.xml");
  ASSERT_EQ(f.programs[1].steps.size(), 5u);
  EXPECT_EQ(f.programs[1].steps[0].op, StepOp::kCopy);
}

// ---------------------------------------------------------------- refusals

struct Bad {
  const char* what;
  std::string text;
  const char* says;
};

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(MscclXml, BadFilesAreRefusedWithWhereAndWhy) {
  const std::string ring = ringAllReduce(Ring{});
  const std::string ag = kAllGatherTwoChannels, a2a = kAllToAll;
  std::string big = "<algo name=\"big\" coll=\"allreduce\" ngpus=\"64\" nchunksperloop=\"16777216\" nchannels=\"1\">";
  for (int r = 0; r < 64; ++r)
    big += "<gpu id=\"" + std::to_string(r) + "\" i_chunks=\"0\" o_chunks=\"0\" s_chunks=\"0\"/>";
  big += "</algo>";
  const std::string fifo = R"(<algo name="fifo" coll="allreduce" ngpus="2" nchunksperloop="2" nchannels="2">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0"><step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1"/></tb>
    <tb id="1" send="1" recv="-1" chan="1"><step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1"/></tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="-1" recv="0" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="1" deps="0"/></tb>
    <tb id="1" send="-1" recv="0" chan="1"><step s="0" type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1"/></tb>
  </gpu>
</algo>)";
  const std::string mixed = R"(<algo name="mixed" coll="allreduce" ngpus="2" nchunksperloop="2" nchannels="1">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="2">
    <tb id="0" send="-1" recv="1" chan="0">
      <step s="0" type="r" dstbuf="s" dstoff="0" cnt="1"/>
      <step s="1" type="re" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="2"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="-1" chan="0"><step s="0" type="s" srcbuf="i" srcoff="0" cnt="1"/></tb>
  </gpu>
</algo>)";
  const std::vector<Bad> cases = {
      {"truncated XML", ring.substr(0, ring.size() / 2), "bad.xml: not XML: "},
      {"not XML at all", "{\"collie_program\": 1}", "bad.xml: not XML: "},
      {"another element", "<algorithm name=\"x\"/>", "bad.xml: an MSCCL algorithm is one <algo> element"},
      {"an unknown step type", replaced(ring, "type=\"rrs\"", "type=\"rrx\""),
       "gpu 0, tb 0, step 1: unknown step type \"rrx\""},
      {"an unknown collective", replaced(ring, "coll=\"allreduce\"", "coll=\"broadcast\""),
       "<algo>: attribute \"coll\" is \"broadcast\""},
      {"a peer out of range", replaced(ring, "send=\"1\"", "send=\"4\""),
       "gpu 0, tb 0: attribute \"send\" is 4, outside -1..3"},
      {"a gpu id out of range", replaced(ring, "<gpu id=\"3\"", "<gpu id=\"7\""),
       "<gpu> #3: attribute \"id\" is 7, outside 0..3"},
      {"a missing gpu", replaced(ring, "ngpus=\"4\"", "ngpus=\"5\""), "no <gpu> with id 4 (ngpus is 5)"},
      {"a non-numeric attribute", replaced(ring, "cnt=\"1\"", "cnt=\"one\""),
       "gpu 0, tb 0, step 0: attribute \"cnt\" must be a whole number, not \"one\""},
      {"a missing attribute", replaced(ring, " cnt=\"1\"", ""), "gpu 0, tb 0, step 0: <step> has no attribute \"cnt\""},
      {"an offset past the buffer", replaced(ring, "srcoff=\"3\"", "srcoff=\"4\""),
       "gpu 0, tb 0, step 0: srcoff 4 + cnt 1 is past the end of the input (4 chunks)"},
      {"steps out of order", replaced(ring, "<step s=\"1\"", "<step s=\"2\""), "attribute \"s\" is 2"},
      {"a dependency on no tb", replaced(ag, "depid=\"2\" deps=\"0\"", "depid=\"9\" deps=\"0\""),
       "gpu 0, tb 1, step 1: attribute \"depid\" is 9, but gpu 0 has no tb 9"},
      {"a dependency cycle",
       replaced(ag, "dstoff=\"0\" cnt=\"2\" depid=\"-1\" deps=\"-1\"", "dstoff=\"0\" cnt=\"2\" depid=\"1\" deps=\"0\""),
       "bad.xml: no step can run: gpu 0, tb 0, step 0 (cpy) waits for step 0 of tb 1; gpu 0, tb 1, step 0 (s) waits "
       "for step 0 of tb 0: a dependency cycle"},
      {"a receive without a send",
       replaced(a2a, "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"1\"",
                "<step s=\"0\" type=\"nop\" srcbuf=\"i\" srcoff=\"1\""),
       "gpu 1, tb 1, step 1: receives message 1 from gpu 0 on channel 0, but gpu 0 sends only 0 on that channel (a "
       "receive without a send)"},
      {"sends one FIFO cannot order", fifo,
       "bad.xml: no step can run: gpu 1, tb 0, step 0 (r) waits for step 0 of tb 1; gpu 1, tb 1, step 0 (r) receives "
       "from gpu 0 on channel 1, but Collie's one FIFO from gpu 0 to gpu 1 holds first the message of channel 0 (gpu "
       "0, tb 0, step 0), which tb 0 receives: one FIFO per pair of ranks cannot keep the order of these sends"},
      {"a huge count", replaced(ring, "cnt=\"1\"", "cnt=\"99999999999\""),
       "attribute \"cnt\" is 99999999999, outside 1..16777216"},
      {"a count past 64 bits", replaced(ring, "cnt=\"1\"", "cnt=\"99999999999999999999999\""),
       "attribute \"cnt\" must be a whole number"},
      {"huge buffers", big, "<algo>: too large to import"},
      {"a step that completes part of its reduction", mixed,
       "gpu 0, tb 0, step 1: writes 1 of 2 chunks as their reduction completes and the others not"},
      {"a buffer larger than the collective's", replaced(ring, "i_chunks=\"4\"", "i_chunks=\"5\""),
       "gpu 0: attribute \"i_chunks\" is 5, more than the allreduce's input holds (4 chunks"},
      {"an unknown protocol", replaced(ring, "proto=\"Simple\"", "proto=\"LL256\""),
       "attribute \"proto\" is \"LL256\""},
      {"two tbs on one channel",
       replaced(a2a, "<tb id=\"2\" send=\"2\" recv=\"2\"", "<tb id=\"2\" send=\"1\" recv=\"2\""),
       "gpu 0, tb 2: tb 1 also sends to gpu 1 on channel 0"},
      {"a send in a tb that sends to no one",
       replaced(ag, "<tb id=\"2\" send=\"-1\" recv=\"2\" chan=\"0\">\n      <step s=\"0\" type=\"r\"",
                "<tb id=\"2\" send=\"-1\" recv=\"2\" chan=\"0\">\n      <step s=\"0\" type=\"s\""),
       "gpu 0, tb 2, step 0: a \"s\" step sends, but its tb has send=\"-1\""},
      {"counts that differ",
       replaced(a2a, "srcoff=\"1\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"",
                "srcoff=\"1\" dstbuf=\"o\" dstoff=\"0\" cnt=\"2\""),
       "gpu 0, tb 1, step 0: sends message 1 to gpu 1 on channel 0 of cnt 2, but step 1 of gpu 1 that receives it has "
       "cnt 1"},
  };
  for (const Bad& c : cases) {
    ProgramFile f;
    const Status st = parseMscclXml(c.text, "bad.xml", &f);
    ASSERT_FALSE(st.ok()) << c.what;
    EXPECT_EQ(st.code(), collieInvalidArgument) << c.what;
    EXPECT_EQ(st.message().rfind("bad.xml: ", 0), 0u) << c.what << ": " << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.what << ": " << st.message();
  }
}

// ---------------------------------------------------------------- through communicators

using collie::test::TempFile;

TEST(MscclXml, LoadProgramFileTakesXml) {
  TempFile file(ringAllReduce(Ring{}), ".xml");
  ProgramFile f;
  const Status st = loadProgramFile(file.path, &f);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(f.name, "ring");
  EXPECT_TRUE(looksLikeMscclXml("\xEF\xBB\xBF  \n<algo/>", "x"));
  EXPECT_TRUE(looksLikeMscclXml("", "a.xml"));
  EXPECT_FALSE(looksLikeMscclXml("{\"collie_program\": 1}", "a.json"));
}

void expectRuns(const std::string& xml, int n, bool tinySlots, const std::string& what) {
  const ProgramFile f = load(xml);
  test::Coll coll;
  ASSERT_TRUE(test::toColl(f.collective, &coll));
  TempFile file(xml, ".xml");
  const std::string spec = std::string(collectiveName(f.collective)) + ":file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", tinySlots ? "4096" : nullptr);
  ScopedEnv slots("COLLIE_SLOTS", tinySlots ? "2" : nullptr);
  test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << what << ": " << collieGetLastError(nullptr);
  const uint64_t seed = test::testSeed();
  const size_t several = (tinySlots ? 3 * 1024 + 5 : 65537) / f.chunks + 1;
  int cases = 0;
  const std::string err = test::runSweep(
      comms, coll, tinySlots, {0, f.chunks, 13 * f.chunks, several * f.chunks}, [](int) { return 0; }, seed, spec,
      &cases);
  ASSERT_EQ(err, "") << what;
  printf("%s: %d cases exact\n", what.c_str(), cases);
}

TEST(MscclXml, RunsThroughCommunicators) {
  Ring twoChannels;
  twoChannels.channels = 2;
  twoChannels.fused = false;
  Ring inPlace;
  inPlace.inPlace = true;
  expectRuns(ringAllReduce(Ring{}), 4, false, "ring allreduce");
  expectRuns(ringAllReduce(twoChannels), 4, true, "two-channel ring allreduce, tiny slots");
  expectRuns(ringAllReduce(inPlace), 4, false, "in-place-only ring allreduce");
  expectRuns(kAllGatherTwoChannels, 3, true, "allgather with dependencies, tiny slots");
  expectRuns(inPlaceAllGather(4), 4, false, "in-place-only allgather");
  expectRuns(kAllToAll, 3, false, "alltoall");
  expectRuns(ringReduceScatter(4, true), 4, true, "in-place-only reduce_scatter, tiny slots");
}

}  // namespace
}  // namespace collie
