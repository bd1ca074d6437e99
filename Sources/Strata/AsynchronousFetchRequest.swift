public import Foundation

/// A fetch run later on the context's queue, its objects handed to a completion block
/// (Core Data's `NSAsynchronousFetchRequest`). `ManagedObjectContext.execute(_:)`
/// returns at once with an ``AsynchronousFetchResult`` whose ``AsynchronousFetchResult/progress``
/// can cancel the fetch before it runs; the block then runs on the context's queue, after
/// the blocks scheduled before, with the same result filled in.
///
/// In `async` code the plain form does the same without a block:
/// `let runs = try await context.perform { try $0.fetch(request) }`.
///
/// ```swift
/// let asynchronous = AsynchronousFetchRequest(fetchRequest: Run.fetchRequest()) { result in
///     guard let runs = result.finalResult else { return }   // operationError says why
///     show(runs)
/// }
/// try context.execute(asynchronous)
/// ```
public struct AsynchronousFetchRequest<Result: ManagedObject>: Sendable {
    /// The fetch to run (`fetchRequest`).
    public var fetchRequest: FetchRequest<Result>
    /// Called on the context's queue when the fetch has run, failed or been cancelled
    /// (`completionBlock`).
    public var completionBlock: (@Sendable (AsynchronousFetchResult<Result>) -> Void)?
    /// How many objects the caller expects (`estimatedResultCount`): the progress's total
    /// until the fetch has run (0: one unit).
    public var estimatedResultCount = 0

    /// A request running `fetchRequest` and calling `completionBlock` with its result.
    public init(fetchRequest: FetchRequest<Result>, completionBlock: (@Sendable (AsynchronousFetchResult<Result>) -> Void)? = nil) {
        self.fetchRequest = fetchRequest
        self.completionBlock = completionBlock
    }
}

/// What an asynchronous fetch gives (Core Data's `NSAsynchronousFetchResult`): returned by
/// `ManagedObjectContext.execute(_:)` before the fetch runs, and handed to the
/// completion block once it has — the same object. Use it on the context's queue only (it
/// holds managed objects); its ``progress`` may be cancelled from anywhere.
public final class AsynchronousFetchResult<Result: ManagedObject> {
    /// The fetch request run (`fetchRequest`).
    public let fetchRequest: FetchRequest<Result>
    /// The fetched objects once the fetch has run; nil before, after an error or when it
    /// was cancelled (`finalResult`).
    public internal(set) var finalResult: [Result]?
    /// Why there is no ``finalResult``: the fetch's error, or `CocoaError(.userCancelled)`
    /// for a fetch cancelled before it ran (`operationError`).
    public internal(set) var operationError: (any Error)?
    /// The fetch's progress (`progress`): its total is the request's estimated count (or 1)
    /// until the fetch has run, then the number of objects, all completed. Cancelling it
    /// before the fetch runs cancels the fetch.
    public let progress: Progress
    /// The context the fetch runs in (`managedObjectContext`).
    public private(set) weak var managedObjectContext: ManagedObjectContext?

    init(fetchRequest: FetchRequest<Result>, context: ManagedObjectContext, estimatedCount: Int) {
        self.fetchRequest = fetchRequest
        managedObjectContext = context
        progress = Progress(totalUnitCount: Int64(max(estimatedCount, 1)))
    }

    /// Cancels the fetch if it hasn't run yet (`cancel()`): the completion block then gets
    /// `CocoaError(.userCancelled)` as ``operationError``. A fetch that has run stays as it is.
    public func cancel() { progress.cancel() }
}

extension ManagedObjectContext {
    /// Schedules `request`'s fetch on the context's queue, after the blocks already there,
    /// and returns its result at once, still empty (Core Data's `execute(_:)` of an
    /// `NSAsynchronousFetchRequest`). When the block runs, the fetch fills
    /// ``AsynchronousFetchResult/finalResult`` (or ``AsynchronousFetchResult/operationError``)
    /// and the completion block is called with the same result, on this queue. Spec 0008,
    /// "Asynchronous fetches".
    @discardableResult
    public func execute<Result>(_ request: AsynchronousFetchRequest<Result>) -> AsynchronousFetchResult<Result> {
        let result = AsynchronousFetchResult(fetchRequest: request.fetchRequest, context: self, estimatedCount: request.estimatedResultCount)
        let token = UUID()
        asynchronousFetches[token] = result
        let completion = request.completionBlock
        perform { context in context.runAsynchronousFetch(token, as: Result.self, completion) }
        return result
    }

    /// Runs the asynchronous fetch kept under `token` and calls `completion` with its result.
    private func runAsynchronousFetch<Result>(
        _ token: UUID, as type: Result.Type, _ completion: (@Sendable (AsynchronousFetchResult<Result>) -> Void)?
    ) {
        guard let result = asynchronousFetches.removeValue(forKey: token) as? AsynchronousFetchResult<Result> else { return }
        if result.progress.isCancelled {
            result.operationError = CocoaError(.userCancelled)
        } else {
            do {
                let objects = try fetch(result.fetchRequest)
                result.finalResult = objects
                result.progress.totalUnitCount = Int64(objects.count)
                result.progress.completedUnitCount = Int64(objects.count)
            } catch {
                result.operationError = error
            }
        }
        completion?(result)
    }
}
