import Foundation
import Strata
import StrataTestSupport
import Synchronization
import Testing

/// `AsynchronousFetchRequest` and `context.execute(_:)` of it (Core Data's
/// `NSAsynchronousFetchRequest`; spec 0008, "Asynchronous fetches").
@Suite("Asynchronous fetch requests: run later on the context's queue, the same result handed to the completion block")
struct AsynchronousFetchTests {
    final class Customer: ManagedObject {}

    /// What the completion block saw: the result's identity, the names fetched, the error.
    struct Seen: Sendable, Equatable {
        var result: ObjectIdentifier
        var names: [String]?
        var error: String?
    }

    static func stored(_ dir: TemporaryDirectory) async throws -> PersistentStoreCoordinator {
        let coordinator = try openCoordinator(dir, model: try BatchModels.shop)
        coordinator.register(Customer.self, forEntityName: "Customer")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            _ = try context.execute(BatchInsertRequest(entityName: "Customer", objects: BatchRequestTests.customers(3)))
        }
        return coordinator
    }

    @Test("execute returns at once with no result; the block runs after the blocks scheduled before, typed, with the same result object and progress complete")
    func runsLaterWithTheSameResult() async throws {
        let dir = try TemporaryDirectory()
        let context = privateContext(try await Self.stored(dir))
        let seen = Mutex<[Seen]>([])
        let returned = try await context.perform { (context: isolated ManagedObjectContext) throws -> ObjectIdentifier in
            var fetch = FetchRequest<Customer>(entityName: "Customer")
            fetch.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: false)]
            let request = AsynchronousFetchRequest(fetchRequest: fetch) { result in
                let customers: [Customer]? = result.finalResult
                seen.withLock {
                    $0.append(Seen(result: ObjectIdentifier(result), names: customers?.map { $0.value(forKey: "name") as? String ?? "?" }, error: nil))
                }
                #expect(result.progress.completedUnitCount == 3 && result.progress.totalUnitCount == 3)
                #expect(result.operationError == nil)
            }
            let result = context.execute(request)
            // Nothing has run yet: the block waits for this one to end.
            #expect(result.finalResult == nil && result.operationError == nil)
            #expect(seen.withLock { $0.isEmpty })
            // Changed after execute, before the block runs: the fetch sees it.
            let first = try context.fetch(FetchRequest<Customer>(entityName: "Customer", format: "name == 'C1'"))
            first.first?.setValue("C9", forKey: "name")
            return ObjectIdentifier(result)
        }
        await context.perform { _ in }
        #expect(seen.withLock { $0 } == [Seen(result: returned, names: ["C9", "C3", "C2"], error: nil)])
    }

    @Test("cancelled before it runs: no fetch, the block gets userCancelled and no objects; cancelling after it ran changes nothing")
    func cancelled() async throws {
        let dir = try TemporaryDirectory()
        let context = privateContext(try await Self.stored(dir))
        let seen = Mutex<[Seen]>([])
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let request = AsynchronousFetchRequest(fetchRequest: FetchRequest<Customer>(entityName: "Customer")) { result in
                let error = (result.operationError as? CocoaError)?.code == .userCancelled ? "cancelled" : result.operationError.map { "\($0)" }
                seen.withLock { $0.append(Seen(result: ObjectIdentifier(result), names: result.finalResult.map { $0.map { _ in "x" } }, error: error)) }
            }
            context.execute(request).cancel()
            let kept = context.execute(request)
            #expect(kept.finalResult == nil)
            context.userInfo["kept"] = kept
        }
        await context.perform { _ in }
        #expect(seen.withLock { $0.map(\.error) } == ["cancelled", nil])
        #expect(seen.withLock { $0.map(\.names) } == [nil, ["x", "x", "x"]])
        await context.perform { (context: isolated ManagedObjectContext) in
            let kept = context.userInfo["kept"] as? AsynchronousFetchResult<Customer>
            kept?.cancel()
            #expect(kept?.finalResult?.count == 3 && kept?.operationError == nil)
        }
    }

    @Test("a fetch that fails hands its error to the block as operationError, with no objects")
    func failureIsOperationError() async throws {
        let dir = try TemporaryDirectory()
        let context = privateContext(try await Self.stored(dir))
        let seen = Mutex<[Seen]>([])
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            let request = AsynchronousFetchRequest(fetchRequest: try FetchRequest(entityName: "Customer", format: "height > 3")) { result in
                seen.withLock { $0.append(Seen(result: ObjectIdentifier(result), names: result.finalResult.map { $0.map { _ in "x" } }, error: result.operationError.map { "\($0)" })) }
            }
            context.execute(request)
        }
        await context.perform { _ in }
        let only = try #require(seen.withLock { $0.first })
        #expect(only.names == nil)
        #expect(only.error?.contains("height") == true)
    }
}
