// Program files: an algorithm written outside Collie, as JSON (docs/program-files.md), or imported from MSCCL's
// XML (msccl_xml.h).
//
// A file holds one collective's programs for a fixed rank count, in units of chunks: the collective's count
// argument is cut into `chunks` equal chunks, and every offset and count of a step is a number of chunks. A call
// of `count` elements runs the file when `chunks` divides `count`; each chunk is then count / chunks elements.
// Channels are not in the file: the executors split every step across their channels, as for built-in
// algorithms.
//
//   {
//     "collie_program": 1,
//     "collective": "allreduce", "name": "my_ring", "nranks": 2, "root": 0, "chunks": 2,
//     "min_bytes": 0, "max_bytes": 1048576,        (optional: the call sizes it serves, fileCallBytes)
//     "protocol": "auto",                          (optional: "simple" or "ll" on the CUDA backend)
//     "ranks": [
//       {"rank": 0, "scratch": 0, "steps": [
//         {"op": "send", "send": 1, "src": ["input", 0], "count": 1},
//         ...]},
//       ...]
//   }
//
// A step's fields are those of Step (program.h); a field left out has Step's default value. Loading checks the
// file's shape (every field's type and range, peers among the ranks, every range inside its buffer); the
// verifier proves what the programs compute.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/program.h"
#include "algorithms/registry.h"
#include "base/status.h"

namespace collie {

/// The protocol a file asks for on the CUDA backend (JSON "protocol", MSCCL's proto): kAuto is Collie's choice by
/// size (COLLIE_PROTO), kSimple never LL, kLL the LL protocol wherever a call fits one round of LL slots.
enum class FileProtocol { kAuto, kSimple, kLL };

/// The programs of a file, in chunks (each program built for count == chunks).
struct ProgramFile {
  Collective collective = Collective::kAllReduce;
  std::string name;
  int nranks = 1;
  int root = 0;
  uint64_t chunks = 1;
  std::vector<Program> programs;  // programs[r] is rank r's, in chunk units
  uint64_t maxStepChunks = 0;     // the most chunks one step sends or receives
  bool crossesBlocks = false;     // a range spans two ranks' blocks of a block-structured buffer
  uint64_t hash = 0;              // of the file's text: ranks must run the same file, whatever its path
  // The calls the file serves, by fileCallBytes, both ends included (JSON min_bytes/max_bytes, MSCCL's
  // minBytes/maxBytes); for other sizes the tuner picks, as if no file were named.
  uint64_t minBytes = 0;
  uint64_t maxBytes = UINT64_MAX;
  FileProtocol protocol = FileProtocol::kAuto;
};

/// The largest `chunks` a file may declare, and the largest offset + count of a step in chunks: enough for any
/// schedule a person or a synthesizer writes, small enough that scaling to elements cannot overflow silently.
constexpr uint64_t kMaxFileChunks = uint64_t{1} << 24;

/// Parses and checks `text` (the contents of `path`, which only names it in errors).
Status parseProgramFile(const std::string& text, const std::string& path, ProgramFile* out);

/// Reads and parses the file at `path` (a regular file of at most 64 MiB): as MSCCL XML (msccl_xml.h) when its
/// first character other than white space is '<' or its name ends in ".xml", else as JSON.
Status loadProgramFile(const std::string& path, ProgramFile* out);

/// The file's programs for a call of `count` elements: every offset and count times count / chunks. An error
/// names the file and the count when `chunks` does not divide `count`.
Status programsForCount(const ProgramFile& file, uint64_t count, std::vector<Program>* out);

/// Rank args.rank's program for a call (or a round of one) of args.count elements, rank blocks args.blockStride()
/// apart; args.count must be a multiple of the file's chunks (the caller checks, naming the file).
Program fileProgram(const ProgramFile& file, const ProgramArgs& args);

/// The largest count one round of the file may be given when a slot holds `slotElems` elements: a multiple of
/// its chunks at which no step moves more than a slot, as rounds of built-in algorithms do (registry.h,
/// RoundRule). One round (UINT64_MAX) for a file with a range across rank blocks, which rounds cannot cut.
uint64_t fileRoundCount(const ProgramFile& file, uint64_t slotElems);

/// A call's size as a file's byte range measures it, as MSCCL does: the count argument times the element size
/// (`bytes`, as the tuner has it), times the rank count for the collectives whose count is one rank's block
/// (allgather, reduce_scatter, alltoall, gather, scatter), so that it is the size of the call's larger buffer.
uint64_t fileCallBytes(Collective c, uint64_t bytes, int nranks);

/// Whether `file` serves a call of `callBytes` (fileCallBytes): minBytes <= callBytes <= maxBytes.
bool fileServes(const ProgramFile& file, uint64_t callBytes);

/// Proves that the file's programs, cut into rounds by fileRoundCount, cannot deadlock on `nslots` slots per
/// connection: with every step at most one slice, or, for a file run in one round, with one slot and every step
/// more than a slice.
Status verifyFileSlots(const ProgramFile& file, const std::string& path, uint32_t nslots);

/// The algorithm of the program file at `path` for collective `c`, loaded and verified once per path and text
/// and kept for the life of the process (communicators and program caches hold its address). Its name is
/// "file:" and the file's name.
Status fileAlgorithm(const std::string& path, Collective c, const AlgorithmInfo** out);

/// Proves a file's programs with the verifier at 1, 2 and 3 times its chunks, out of place and (where the
/// collective has an in-place form) in place, with joined steps run as one and one after another. The error
/// names the file, the count and the verifier's first wrong element or blocked step; `*counts` (optional) says
/// what was proved.
Status verifyProgramFile(const ProgramFile& file, const std::string& path, std::string* counts = nullptr);

/// `programs` (one per rank, built for count == chunks) as a file's text.
std::string programFileText(const std::vector<Program>& programs, uint64_t chunks);

/// A built-in algorithm as a file for `nranks` ranks: the smallest chunk count at which its programs scale
/// exactly with the count (programs for 2 and 3 times as many elements are the same steps, scaled), so that the
/// file gives the built-in programs for every count it divides. An error when there is none up to 64 x nranks
/// (all-to-all-v, whose programs depend on the call's per-peer counts, has none).
Status exportAlgorithm(const AlgorithmInfo& algo, int nranks, int root, int ranksPerNode, std::string* text,
                       uint64_t* chunks);

}  // namespace collie
