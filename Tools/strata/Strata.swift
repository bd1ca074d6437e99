import ArgumentParser
import Strata

@main
struct StrataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "strata", version: StrataVersion.current)
}
