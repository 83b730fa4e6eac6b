// https://developer.apple.com/documentation/foundationmodels/origami-crafting-a-dynamic-tutorial-for-apple-intelligence
// The sample app's profile, instructions, generable types and stream handling, as published;
// a photo becomes an attachment by its file URL here (the app decodes a UIImage or NSImage).
import Foundation
import FoundationModels

enum Origami {
    enum OrchestratorMode { case brainstorm, tutorial, term }

    final class Orchestrator: @unchecked Sendable {
        var mode: OrchestratorMode = .brainstorm
    }

    struct OrigamiShapeOptions: DynamicInstructions {
        var body: some DynamicInstructions { Instructions("Shapes: crane, boat, frog.") }
    }
    static let origamiShapeOptions = OrigamiShapeOptions()

    struct TutorialInstructions: DynamicInstructions {
        let orchestrator: Orchestrator
        var body: some DynamicInstructions { Instructions("Write a tutorial.") }
    }

    struct TermInstructions: DynamicInstructions {
        let orchestrator: Orchestrator
        var body: some DynamicInstructions { Instructions("Explain a term.") }
    }

    struct OrchestratorProfile: LanguageModelSession.DynamicProfile {
        var orchestrator: Orchestrator
        // Swap to PrivateCloudComputeLanguageModel() to opt into PCC.
        var serverModel = SystemLanguageModel()

        var body: some DynamicProfile {
            switch orchestrator.mode {
            case .brainstorm:
                Profile {
                    BrainstormInstructions(orchestrator: orchestrator)
                }
                .model(serverModel)
                .temperature(1.0)
            case .tutorial:
                if !isOnDevice {
                    Profile {
                        TutorialInstructions(orchestrator: orchestrator)
                    }
                    .model(serverModel)
                    .reasoningLevel(.deep)
                } else {
                    Profile {
                        TutorialInstructions(orchestrator: orchestrator)
                    }
                    .model(SystemLanguageModel())
                }
            case .term:
                Profile {
                    TermInstructions(orchestrator: orchestrator)
                }
                .model(SystemLanguageModel())
            }
        }

        private var isOnDevice: Bool {
            type(of: serverModel) == SystemLanguageModel.self
        }
    }

    struct BrainstormInstructions: DynamicInstructions {
        let orchestrator: Orchestrator

        var body: some DynamicInstructions {
            Instructions(
                """
                Your job is to help the user explore and define their craft project.
                When the user shares photos, identify the craft type, colors, \
                materials, and any relevant details.
                Then generate craft project ideas that best fit what you see \
                and the user's request. If the user provides craft supplies, \
                be sure to incorporate them in the project idea.
                Recommend a specific craft that is just 1 component, unless the \
                user explicitly requests something more complex.
                Most importantly: offer ideas that truly reflect the user's \
                inspiration, materials, and what makes sense given the photos.
                """
            )
            origamiShapeOptions
        }
    }

    struct Photo {
        let url: URL
        let idString: String

        func toPrompt() async throws -> Prompt {
            let idImage = Attachment(imageURL: url).label(idString)
            return Prompt {
                idImage
            }
        }
    }

    struct Project {
        var description: String
        var unanalyzedPhotos: [Photo]
    }

    @Generable
    struct ImageAnalysis {
        var image: ImageReference
        var analysis: String
        @Guide(
            description:
                "What do you think the *purpose* of this photo is for the project?"
        )
        var typeOfImage: ImageCategory
    }

    @Generable
    struct ImageAnalysisList {
        var images: [ImageAnalysis]
    }

    @Generable
    struct BrainstormIdea {
        var title: String
        var description: String
    }

    @Generable
    struct BrainstormIdeaList {
        @Guide(.minimumCount(3))
        var ideas: [BrainstormIdea]
    }

    @Generable
    enum ImageCategory: String, Codable {
        case craftInspiration = "inspiration for the craft"
        case craftSupplies = "craft supplies"
        case finishedPiece = "a finished craft piece"
    }

    @Generable
    struct CoachSection: Codable {
        var title: String
        var body: String
    }

    @Generable
    struct CoachFeedback: Codable {
        @Guide(description: "Break feedback into 2-3 sections with titles like 'What You Did Well', 'Try This Instead', or 'Next Steps'.")
        var sections: [CoachSection]

        @Guide(description: "True ONLY if the photo clearly and unambiguously demonstrates that the user has completed the specific goal of the current step. Set to false if the photo shows a mistake, an unrelated subject, insufficient progress, or if you are uncertain. Err strongly on the side of false.")
        var isCurrentStepComplete: Bool

        @Guide(description: "A short (1-2 sentence) encouraging message shown when isCurrentStepComplete is true. Leave blank if isCurrentStepComplete is false.")
        var completionMessage: String?
    }

    final class Brainstorm: @unchecked Sendable {
        var ideas: [BrainstormIdea] = []
        var newIdeas: [BrainstormIdea] = []

        func processStream(
            _ stream: LanguageModelSession.ResponseStream<BrainstormIdeaList>
        ) async throws {
            for try await partialResponse in stream where partialResponse.content.ideas != nil {
                for (offset, partialIdea) in partialResponse.content.ideas!.enumerated() {
                    let title = partialIdea.title ?? ""
                    let desc = partialIdea.description ?? ""
                    if newIdeas.count <= offset {
                        newIdeas.append(BrainstormIdea(title: title, description: desc))
                    } else {
                        newIdeas[offset].title = title
                        newIdeas[offset].description = desc
                    }
                }
            }
            ideas.append(contentsOf: newIdeas)
            newIdeas = []
        }
    }

    enum CoachState { case idle, loading, responded(CoachFeedback.PartiallyGenerated) }

    final class Coach: @unchecked Sendable {
        var state = CoachState.idle

        func processStream(_ stream: LanguageModelSession.ResponseStream<CoachFeedback>) async throws {
            state = .loading
            // Buffer the full response and only publish when streaming completes.
            var finalContent: CoachFeedback.PartiallyGenerated?
            for try await partial in stream {
                finalContent = partial.content
            }
            if let finalContent {
                state = .responded(finalContent)
            }
        }
    }

    static func brainstorm(session: LanguageModelSession, brainstorm: Brainstorm) async throws {
        let stream = session.streamResponse(
            to: "What can I make with this? Please offer 3 ideas.",
            generating: BrainstormIdeaList.self
        )
        try await brainstorm.processStream(stream)
    }

    static func coach(session: LanguageModelSession, coach: Coach, photos: [Photo], stepNumber: Int,
                      stepContent: String?) async throws {
        var imagePrompts: [Prompt] = []
        for photo in photos {
            imagePrompts.append(try await photo.toPrompt())
        }
        let prompt = Prompt {
            "I'm working on step \(stepNumber) of the tutorial."
            if let stepContent {
                "Step \(stepNumber): \(stepContent)"
            }
            """
            Here is my progress photo. First describe what you see and compare \
            it to the goal of step \(stepNumber). Then provide feedback sections. \
            Finally, set isCurrentStepComplete to true only if the photo clearly \
            shows step \(stepNumber) is complete.
            """
            imagePrompts
        }
        let stream = session.streamResponse(
            to: prompt,
            generating: CoachFeedback.self
        )
        try await coach.processStream(stream)
    }
}

extension LanguageModelSession {
    func streamProjectImageAnalysis(_ project: Origami.Project) async throws
        -> LanguageModelSession.ResponseStream<Origami.ImageAnalysisList>
    {
        var imagePrompts: [Prompt] = []
        for photo in project.unanalyzedPhotos {
            imagePrompts.append(try await photo.toPrompt())
        }
        let prompt = Prompt {
            """
            The craft so far is: \(project.description)
            If an image contains a crafted item relevant to this craft's \
            title, treat that image as a finished piece. If an image \
            doesn't contain any craft, treat it as inspiration for an idea.
            """
            imagePrompts
        }
        return streamResponse(
            to: prompt,
            generating: Origami.ImageAnalysisList.self
        )
    }
}
