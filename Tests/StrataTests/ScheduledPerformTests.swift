import Foundation
import Strata
import StrataTestSupport
import Testing

/// `perform(schedule:_:)` (Core Data's `NSManagedObjectContext.ScheduledTaskType`; spec 0006
/// §1 item 2): `.immediate` runs at once for a caller already on the context's queue,
/// `.enqueued` after what the queue holds.
@Suite("perform(schedule:): immediate runs at once on the context's queue, enqueued after what the queue holds")
struct ScheduledPerformTests {
    /// Runs on the context's queue (isolated to it): schedules a block with the non-async
    /// `perform`, then one with `schedule`, and returns the order the two ran in.
    static func order(_ context: isolated ManagedObjectContext, _ schedule: ManagedObjectContext.ScheduledTaskType) async -> [String] {
        context.userInfo["order"] = [String]()
        Self.schedule(context) { context in
            context.userInfo["order"] = (context.userInfo["order"] as? [String] ?? []) + ["scheduled before"]
        }
        await context.perform(schedule: schedule) { context in
            #expect(context.isOnContextQueue)
            context.userInfo["order"] = (context.userInfo["order"] as? [String] ?? []) + ["\(schedule)"]
        }
        // Let the earlier block run when it was still waiting.
        await context.perform(schedule: .enqueued) { _ in }
        return context.userInfo["order"] as? [String] ?? []
    }

    /// The non-async `perform(_:)` (async code would pick the awaiting one).
    static func schedule(_ context: ManagedObjectContext, _ body: @escaping @Sendable (isolated ManagedObjectContext) -> Void) {
        context.perform(body)
    }

    @Test("from code on the context's queue: .immediate runs before a block scheduled earlier, .enqueued after it")
    func immediateAndEnqueued() async throws {
        let dir = try TemporaryDirectory()
        let context = privateContext(try openCoordinator(dir, model: try BatchModels.shop))
        #expect(await Self.order(context, .immediate) == ["immediate", "scheduled before"])
        #expect(await Self.order(context, .enqueued) == ["scheduled before", "enqueued"])
    }

    @Test("from off the queue both run after what the queue holds, return the block's value and rethrow its error")
    func offTheQueue() async throws {
        let dir = try TemporaryDirectory()
        let context = privateContext(try openCoordinator(dir, model: try BatchModels.shop))
        for schedule in [ManagedObjectContext.ScheduledTaskType.immediate, .enqueued] {
            Self.schedule(context) { context in context.userInfo["mark"] = "\(schedule)" }
            let seen = await context.perform(schedule: schedule) { context in context.userInfo["mark"] as? String }
            #expect(seen == "\(schedule)")
            let count = try await context.perform(schedule: schedule) { context in
                _ = try context.insertNewObject(forEntityName: "Team")
                return try context.count(for: FetchRequest(entityName: "Team"))
            }
            #expect(count >= 1)
            await #expect(throws: ContextError.self) {
                try await context.perform(schedule: schedule) { context in
                    _ = try context.insertNewObject(forEntityName: "NoSuchEntity")
                }
            }
        }
    }
}
