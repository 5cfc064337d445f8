// MSCCL XML import: an algorithm written in MSCCL's XML format (the files msccl-tools writes and the MSCCL
// runtime reads) becomes a program file (program_file.h), so that everything that takes program files takes it:
// collie-sim verify|show|predict, COLLIE_ALGO=COLLECTIVE:file:PATH, collie-bench --algo file:PATH, and the
// verifier when a communicator loads it. loadProgramFile reads a file as XML when its first character other
// than white space is '<' or its name ends in ".xml".
//
//   <algo name="ring" coll="allreduce" ngpus="4" nchunksperloop="4" nchannels="1" proto="Simple" inplace="0">
//     <gpu id="0" i_chunks="4" o_chunks="4" s_chunks="0">
//       <tb id="0" send="1" recv="3" chan="0">
//         <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1"
//               hasdep="0"/>
//         ...
//
// An MSCCL rank runs several thread blocks at once, each a sequence of steps with one send peer, one receive
// peer and a channel, ordered across blocks by dependencies (depid, deps); a Collie rank runs one sequence of
// steps, with one FIFO per ordered pair of ranks. The import runs all ranks' blocks together, symbolically, and
// writes each rank's steps in the order they ran: docs/program-files.md ("MSCCL XML") says how, what maps to
// what, and what is refused.
#pragma once

#include <string>

#include "algorithms/program_file.h"
#include "base/status.h"

namespace collie {

/// Parses `text`, an MSCCL XML algorithm (the contents of `path`, which only names it in errors), into `out`, in
/// the units and with the checks of parseProgramFile. Refuses with collieInvalidArgument, naming the file, the
/// element and the attribute, what is malformed or what Collie cannot express: text that is not XML, a missing
/// or non-numeric attribute, an unknown collective or step type, a peer or range outside its bounds, a
/// dependency on no step, and blocks that cannot be put into one order per rank (a dependency cycle, a receive
/// without its send, sends on one pair of ranks whose order one FIFO cannot keep).
Status parseMscclXml(const std::string& text, const std::string& path, ProgramFile* out);

/// Whether loadProgramFile reads `text` (the contents of `path`) as MSCCL XML rather than JSON.
bool looksLikeMscclXml(const std::string& text, const std::string& path);

}  // namespace collie
