import ArgumentParser
import Foundation
import Strata
import StrataLog

/// `--where PREDICATE` of `strata log` and `strata revert`: a predicate over a transaction's
/// header (author, contextName, timestamp, processID, transactionNumber, storeID), as
/// `HistoryRequest.transactionPredicate` takes it (spec 0007).
enum TransactionWhere {
    /// `text` parsed and checked against a transaction's keys: a malformed predicate or an
    /// unknown key is a usage error (exit 64) naming it.
    static func parse(_ text: String) throws -> FormatPredicate {
        do {
            let predicate = try FormatPredicate(format: text)
            try HistoryRequest.validateTransactionPredicate(predicate)
            return predicate
        } catch let error as HistoryError {
            guard case .invalidRequest(let reason) = error else { throw ValidationError("--where: \(error)") }
            throw ValidationError("--where: \(reason)")
        } catch {
            throw ValidationError("--where: \(error)")
        }
    }

    /// Whether `predicate` accepts the transaction with `header` (false when it can't be
    /// evaluated on it).
    static func accepts(_ predicate: FormatPredicate, _ header: EventHeader, storeUUID: UUID) -> Bool {
        (try? predicate.evaluate(with: HistoryRequest.transactionPredicateValues(of: header, storeIdentifier: storeUUID))) ?? false
    }
}
