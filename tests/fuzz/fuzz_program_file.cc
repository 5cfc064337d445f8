// Fuzz target program_file: the text of a program file, as parseProgramFile (algorithms/program_file.h) reads
// it for collie-sim and COLLIE_ALGO. The whole input is the file. Checks: a refusal is one printable sentence
// naming the file; an accepted file has one program per rank whose every range lies inside its buffer, scales
// to a count its chunks divide without overflow, and is written back as a file that parses to the same programs.
#include <string>
#include <vector>

#include "algorithms/program_file.h"
#include "tests/fuzz/fuzz_targets.h"

namespace collie {
namespace fuzz {

int programFile(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ProgramFile file;
  const Status st = parseProgramFile(text, "fuzz.json", &file);
  if (!st.ok()) {
    // Parse errors and unknown names quote the file's bytes; the sentence must still be printable.
    COLLIE_FUZZ_CHECK(st.message().rfind("fuzz.json: ", 0) == 0 && printable(st.message()), st.message());
    return 0;
  }
  COLLIE_FUZZ_CHECK(file.nranks >= 1 && file.nranks <= 64, text);
  COLLIE_FUZZ_CHECK(file.programs.size() == static_cast<size_t>(file.nranks), text);
  COLLIE_FUZZ_CHECK(file.chunks >= 1 && file.chunks <= kMaxFileChunks, text);
  for (const Program& p : file.programs) {
    uint64_t input = 0, output = 0;
    bufferCounts(p, &input, &output);
    for (const Step& s : p.steps) {
      COLLIE_FUZZ_CHECK(s.sendPeer >= -1 && s.sendPeer < file.nranks && s.recvPeer >= -1 && s.recvPeer < file.nranks,
                        text);
      COLLIE_FUZZ_CHECK(s.count <= kMaxFileChunks && s.recvCount <= kMaxFileChunks, text);
    }
  }
  std::vector<Program> scaled;
  COLLIE_FUZZ_CHECK(programsForCount(file, file.chunks * 3, &scaled).ok(), text);
  // A count whose chunks would overflow an offset is refused, not wrapped.
  COLLIE_FUZZ_CHECK(!programsForCount(file, UINT64_MAX - (UINT64_MAX % file.chunks), &scaled).ok(), text);
  const std::string again = programFileText(file.programs, file.chunks);
  ProgramFile reread;
  const Status st2 = parseProgramFile(again, "again.json", &reread);
  COLLIE_FUZZ_CHECK(st2.ok(), st2.message() + "\n" + again);
  COLLIE_FUZZ_CHECK(programFileText(reread.programs, reread.chunks) == again, again);
  return 0;
}

}  // namespace fuzz
}  // namespace collie
