// touchstone: the command-line entry point. The commands are declared in the files commands.h
// names; `touchstone help` lists them and `touchstone COMMAND --help` prints each one's flags.
#include "cli/commands.h"
#include "cli/usage.h"
#include "services/common/flags.h"

int main(int argc, char** argv) {
  ts::flags::Program touchstone(
      "touchstone",
      "Continuous conformance of a PyTorch accelerator backend: models from the zoo through "
      "eager, compiled and training modes on the device, verdicts from the numbers, sweeps on a "
      "fleet, and the Query API over their results.");
  ts::cli::AddTouchstoneCommands(touchstone);
  ts::cli::BindProgram(&touchstone);
  return touchstone.Run(argc, argv);
}
