import ArgumentParser
import Strata

/// `strata`: inspect, query, replay, export and maintain Strata stores without the app's code.
@main
struct StrataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Inspect, query, replay, export and maintain Strata stores.",
        discussion: """
            A Strata store carries its own model, so every command here works on any store
            without the app that wrote it.

            Exit status: 0 success, 1 a problem was found or an operation failed, 64 bad usage.
            """,
        version: StrataVersion.current,
        subcommands: [
            InfoCommand.self, LogCommand.self, ReplayCommand.self, ExportCommand.self, QueryCommand.self, CompactCommand.self,
            VerifyCommand.self, ModelCommand.self, MigrateCommand.self, RevertCommand.self, DemoCommand.self, DoctorCommand.self,
        ]
    )
}
