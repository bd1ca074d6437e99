import Foundation
import StrataTestSupport

/// Runs the built `strata` binary with `arguments`.
func strata(_ arguments: String..., input: String? = nil) throws -> ProcessResult {
    try runProcess(BuildProducts.executable("strata"), arguments, input: input)
}
