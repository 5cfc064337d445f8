// Fuzz target msccl_xml: the text of an MSCCL XML algorithm, as parseMscclXml (algorithms/msccl_xml.h) reads it
// for collie-sim and COLLIE_ALGO. The whole input is the file. Checks: a refusal is one printable sentence naming
// the file; an accepted file has one program per rank, peers among the ranks, counts within the file bounds,
// scales to a count its chunks divide without overflow, is written back as a program file that parses to the
// same programs, and imports the same way twice.
#include <string>
#include <vector>

#include "algorithms/msccl_xml.h"
#include "algorithms/program_file.h"
#include "tests/fuzz/fuzz_targets.h"

namespace collie {
namespace fuzz {

int mscclXml(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ProgramFile file;
  const Status st = parseMscclXml(text, "fuzz.xml", &file);
  if (!st.ok()) {
    COLLIE_FUZZ_CHECK(st.code() == collieInvalidArgument, st.message());
    COLLIE_FUZZ_CHECK(st.message().rfind("fuzz.xml: ", 0) == 0 && printable(st.message()), st.message());
    return 0;
  }
  COLLIE_FUZZ_CHECK(file.nranks >= 1 && file.nranks <= 64, text);
  COLLIE_FUZZ_CHECK(file.programs.size() == static_cast<size_t>(file.nranks), text);
  COLLIE_FUZZ_CHECK(file.chunks >= 1 && file.chunks <= kMaxFileChunks, text);
  for (const Program& p : file.programs)
    for (const Step& s : p.steps) {
      COLLIE_FUZZ_CHECK(s.sendPeer >= -1 && s.sendPeer < file.nranks && s.recvPeer >= -1 && s.recvPeer < file.nranks,
                        text);
      COLLIE_FUZZ_CHECK(s.sendPeer != p.rank && s.recvPeer != p.rank, text);
      COLLIE_FUZZ_CHECK(s.count >= 1 && s.count <= kMaxFileChunks && s.recvCount == 0, text);
    }
  std::vector<Program> scaled;
  COLLIE_FUZZ_CHECK(programsForCount(file, file.chunks * 3, &scaled).ok(), text);
  COLLIE_FUZZ_CHECK(!programsForCount(file, UINT64_MAX - (UINT64_MAX % file.chunks), &scaled).ok(), text);
  const std::string written = programFileText(file.programs, file.chunks);
  ProgramFile reread;
  const Status st2 = parseProgramFile(written, "again.json", &reread);
  COLLIE_FUZZ_CHECK(st2.ok(), st2.message() + "\n" + written);
  COLLIE_FUZZ_CHECK(programFileText(reread.programs, reread.chunks) == written, written);
  ProgramFile again;
  COLLIE_FUZZ_CHECK(parseMscclXml(text, "fuzz.xml", &again).ok(), text);
  COLLIE_FUZZ_CHECK(programFileText(again.programs, again.chunks) == written && again.hash == file.hash, text);
  return 0;
}

}  // namespace fuzz
}  // namespace collie
