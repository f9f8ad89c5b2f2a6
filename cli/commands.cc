#include "cli/commands.h"

namespace ts::cli {

void AddTouchstoneCommands(flags::Program& touchstone) {
  AddRunModelCommands(touchstone);
  AddZooCommands(touchstone);
  AddCatalogCommands(touchstone);
  AddSweepCommand(touchstone);
  AddServeCommand(touchstone);
  AddSubmitCommand(touchstone);
  AddScheduleCommands(touchstone);
  AddDbCommands(touchstone);
  AddQueryCommands(touchstone);
  touchstone.Notes(
      "exit: 0 done (a verdict was produced, including load_fail), 1 failure (the gate: failed),\n"
      "2 usage or unusable input (the flag or field named), 3 no answer from the scheduler.\n"
      "cli/README.md describes every command.");
}

}  // namespace ts::cli
