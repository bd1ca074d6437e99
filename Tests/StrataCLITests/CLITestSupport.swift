import Foundation
import StrataTestSupport

/// Runs the built `strata` binary with `arguments`.
func strata(_ arguments: String..., input: String? = nil) throws -> ProcessResult {
    try runProcess(BuildProducts.executable("strata"), arguments, input: input)
}

/// ``strata(_:input:)`` for async tests: the calling task doesn't hold a thread of the
/// cooperative pool while the command runs (``runProcessAsync(_:_:input:environment:currentDirectory:)``).
func strataAsync(_ arguments: String..., input: String? = nil) async throws -> ProcessResult {
    try await runProcessAsync(BuildProducts.executable("strata"), arguments, input: input)
}
