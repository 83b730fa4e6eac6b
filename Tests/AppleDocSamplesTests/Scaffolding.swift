// The app-side types Apple's samples assume (tools, instructions, state, counters): declared
// here so the samples themselves compile as written. None of this is Apple's code.
import Foundation
import FoundationModels
import Synchronization

struct NamedTool: Tool {
    let name: String
    var description: String { "A tool the samples name: \(name)." }
    @Generable struct Arguments { var text: String }
    func call(arguments: Arguments) async throws -> String { arguments.text }
}

struct ListPhotosTool: Tool {
    let description = "Lists the photos of the presentation."
    @Generable struct Arguments { var album: String }
    func call(arguments: Arguments) async throws -> [String] { [] }
}

struct AddPhotoTool: Tool {
    let description = "Adds a photo to the presentation."
    @Generable struct Arguments { var name: String }
    func call(arguments: Arguments) async throws -> String { "Added \(arguments.name)." }
}

typealias ListSlidesTool = ListPhotosTool
typealias AddSlideTool = AddPhotoTool
typealias TodoWriteTool = AddPhotoTool
typealias MyCustomBookTool = ListPhotosTool
typealias MyCustomReadFileTool = ListPhotosTool
typealias SomeTool = AddPhotoTool
typealias RecordImageAnalysisTool = AddPhotoTool
typealias RecordBrainstormTool = AddPhotoTool
typealias BrainstormRecordTool = AddPhotoTool
typealias GenerateProjectTitle = AddPhotoTool
typealias RecipeDatabaseTool = ListPhotosTool

struct TextInstructions: DynamicInstructions {
    let text: String
    var body: some DynamicInstructions { Instructions(text) }
}

struct ImageEditingInstructions: DynamicInstructions {
    var body: some DynamicInstructions {
        Instructions("The person is editing an image.")
        NamedTool(name: "cropImage")
    }
}

struct AnimationEditingInstructions: DynamicInstructions {
    var body: some DynamicInstructions { Instructions("The person is editing an animation.") }
}

typealias PresentationDynamicInstructions = AnimationEditingInstructions
typealias CreativeWritingInstructions = ImageEditingInstructions
typealias TechnicalWritingInstructions = AnimationEditingInstructions
typealias MyCustomFileAccessInstructions = AnimationEditingInstructions
typealias OrigamiExpert = AnimationEditingInstructions
typealias CraftCoach = AnimationEditingInstructions

enum MyCustomWritingMode { case creative, technical }

struct AccessPolicy: Sendable {
    func permits(_ call: Transcript.ToolCall) -> Bool { call.toolName != "deleteEverything" }
}
let myAccessPolicy = AccessPolicy()
enum MyAccessPolicyError: Error { case denied(String) }

/// The counters and state Apple's life-cycle samples update.
nonisolated(unsafe) var activeProfile: String? = nil
nonisolated(unsafe) var promptCount = 0
nonisolated(unsafe) var completedTasks = 0
nonisolated(unsafe) var toolCallCount = 0
nonisolated(unsafe) var toolOutputCount = 0

func clearDebugFromHistory(_ history: [Transcript.Entry]) -> [Transcript.Entry] { history }
func verifyText(_ text: String) -> Bool { !text.contains("forbidden") }

enum Mode: String { case craftAnalysis, brainstorm }
enum CraftMode { case brainstorming, planning, reviewing }
enum Technique: Hashable { case origami, knitting }

final class CraftOrchestrator: @unchecked Sendable {
    var mode: CraftMode = .brainstorming
    var techniques: Set<Technique> = [.origami]
    let pccLanguageModel = PrivateCloudComputeLanguageModel()
    let systemLanguageModel = SystemLanguageModel.default
}

struct TutorialAuthor: DynamicInstructions {
    var orchestrator: CraftOrchestrator
    var body: some DynamicInstructions { Instructions("Write an origami tutorial.") }
}

final class CraftProjectStates: @unchecked Sendable {
    var mode: Mode = .craftAnalysis
    let privateCloudCompute = PrivateCloudComputeLanguageModel()
}

enum SearchBreadDatabaseToolError: Error { case databaseIsEmpty }
