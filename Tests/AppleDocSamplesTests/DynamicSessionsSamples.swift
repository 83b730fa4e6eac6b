// Samples of Apple's documentation of dynamic instructions, profiles and session properties, as
// published; where a sample is a fragment, it sits in the smallest declaration that holds it.
import Foundation
import FoundationModels

// https://developer.apple.com/documentation/foundationmodels/composing-dynamic-sessions-with-instructions-and-profiles
enum ComposingDynamicSessions {
    struct PresentationInstructions: DynamicInstructions {
        // The data source for conditional instructions.
        var isEditingImage = true
        var isEditingAnimation = false

        var body: some DynamicInstructions {
            // The instructions and tools that remain the same across any use of this type.
            Instructions {
                "Help people improve their presentation."
            }
            ListPhotosTool()
            AddPhotoTool()

            // Depending on the state of the app, include additional instructions
            // that provide the model with more task-specific instructions and tools.
            if isEditingImage {
                ImageEditingInstructions()
            }

            if isEditingAnimation {
                AnimationEditingInstructions()
            }
        }
    }

    static func dynamicInstructionsSession() -> LanguageModelSession {
        let session = LanguageModelSession(
            dynamicInstructions: PresentationInstructions()
        )
        return session
    }

    struct CreativeProfile: LanguageModelSession.DynamicProfile {
        var pccModel = PrivateCloudComputeLanguageModel()
        var likesPoetry = true
        var likesAstronomy = false

        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                // Custom instructions and tools for a creative task.
            }
            // Use an instance of the PCC model you create in the parent profile.
            .model(pccModel)
            // Use a higher creative temperature value when a person likes poetry.
            .temperature(likesPoetry ? 0.8 : 0.1)
            // Perform deeper reasoning when a person likes astronomy.
            .reasoningLevel(likesAstronomy ? .deep : .light)
        }
    }

    struct PresentationProfile: LanguageModelSession.DynamicProfile {
        // Create an instance to the server model.
        var pccModel = PrivateCloudComputeLanguageModel()

        // The data source for the profile.
        var isEditingImage = true
        var isEditingAnimation = false

        // Determine which profile to load based on the current state.
        var body: some LanguageModelSession.DynamicProfile {
            if isEditingImage {
                Profile {
                    ImageEditingInstructions()
                }
            } else if isEditingAnimation {
                Profile {
                    AnimationEditingInstructions()
                }
                .model(pccModel)
                .temperature(0.2)
                .reasoningLevel(.light)
            } else {
                Profile {
                    PresentationDynamicInstructions()
                }
                .temperature(0.8)
            }
        }
    }

    static func profileSession() -> LanguageModelSession {
        let session = LanguageModelSession(
            profile: PresentationProfile()
        )
        return session
    }

    // A top-level dynamic profile that includes a single subprofile.
    struct WritingProfile: LanguageModelSession.DynamicProfile {
        var body: some LanguageModelSession.DynamicProfile {
            // By default, the temperature value applies to both branches in
            // `WritingContent` unless a branch adds a temperature modifier.
            WritingContent()
                .temperature(0.5)
        }
    }

    // A dynamic profile that contains two states.
    struct WritingContent: LanguageModelSession.DynamicProfile {
        // A custom writing mode that determines which subprofile to use.
        var mode: MyCustomWritingMode = .creative

        var body: some LanguageModelSession.DynamicProfile {
            switch mode {
            case .creative:
                // Use the temperature `1.0` because the profile-level modifier takes priority.
                Profile {
                    CreativeWritingInstructions()
                }
                .temperature(1.0)
            case .technical:
                // Inherit the temperature `0.5` from `WritingProfile`.
                Profile {
                    TechnicalWritingInstructions()
                }
            }
        }
    }

    struct FileAccessProfile: LanguageModelSession.DynamicProfile {
        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                MyCustomFileAccessInstructions()
                MyCustomReadFileTool()
            }
            .onToolCall { toolCall in
                // Runs before the framework invokes the tool and allows for checking
                // whether the app is in a state to run the tool.
                guard myAccessPolicy.permits(toolCall) else {
                    throw MyAccessPolicyError.denied(toolCall.toolName)
                }
            }
            .onToolOutput { toolCall, output in
                // Runs after the tool. This is a good place to log any necessary activity.
            }
        }
    }

    struct CompactingProfile: LanguageModelSession.DynamicProfile {
        // Get a reference to the session history.
        @SessionProperty(\.history)
        var history

        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                Instructions("You are a helpful assistant.")
                TodoWriteTool()
            }
            .onResponse {
                // When the entries exceed `100`, perform a stateful update to the
                // history so it only includes the last `50` entries.
                if history.count > 100 {
                    history = history.suffix(50)
                }
            }
        }
    }

    struct PlannerTool: Tool {
        let description = "Update the state of the activated skills"

        // Read the shared session state for the currently activated skills.
        @SessionProperty(\.activatedSkills)
        var activatedSkills

        @Generable
        struct Arguments {
            @Guide(description: "The skills to activate")
            var skills: [String]
        }

        func call(arguments: Arguments) -> String {
            // When the model calls this tool, update the skills to an active state.
            for skill in arguments.skills {
                activatedSkills[skill] = true
            }
            return "Activated: \(arguments.skills.joined(separator: ", "))"
        }
    }

    struct DebugProfileModifier: LanguageModelSession.DynamicProfileModifier {
        func body(content: Content) -> some LanguageModelSession.DynamicProfile {
            content
                .temperature(0.0)
                .onResponse { response in
                    print("Debug response: \(response)")
                }
        }
    }

    struct DebugProfile: LanguageModelSession.DynamicProfile {
        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                Instructions("You are a helpful assistant.")
            }
            .debug()
        }
    }

    struct BookIdeasProfile: LanguageModelSession.DynamicProfile {
        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                Instructions("You help people generate fun and interesting book ideas.")
                MyCustomBookTool()
            }
            .historyTransform { history in
                // Perform a local transformation before prompting the model. This transform
                // doesn't affect the global state of the transcript, so you're not losing
                // existing transcript context.
                Array(history.suffix(20))
            }
        }
    }
}

extension SessionPropertyValues {
    @SessionPropertyEntry
    var activatedSkills: [String: Bool] = [:]
}

extension LanguageModelSession.DynamicProfile {
    func debug() -> some LanguageModelSession.DynamicProfile {
        self.modifier(ComposingDynamicSessions.DebugProfileModifier())
    }
}

// https://developer.apple.com/documentation/foundationmodels/languagemodelsession/dynamicprofile
enum DynamicProfilePage {
    struct PresentationProfile: LanguageModelSession.DynamicProfile {
        // The data source for the profile.
        var isEditingImage = true
        var isEditingAnimation = false

        // Determine which profile to load based on the current state.
        var body: some LanguageModelSession.DynamicProfile {
            if isEditingImage {
                // Use the editing image profile.
                Profile { ImageEditingInstructions() }
            } else if isEditingAnimation {
                // Use the editing animation profile.
                Profile { AnimationEditingInstructions() }
            } else {
                // Use the default profile.
                Profile { PresentationDynamicInstructions() }
            }
        }
    }

    struct LastTwentyEntries: LanguageModelSession.DynamicProfile {
        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                // The instructions and tools necessary for the task.
            }
            .historyTransform { history in
                Array(history.suffix(20))
            }
        }
    }
}

// The life-cycle pages: onActivate(perform:), onDeactivate(perform:), onPrompt(perform:),
// onResponse(perform:), onToolCall(perform:), onToolOutput(perform:), under
// https://developer.apple.com/documentation/foundationmodels/languagemodelsession/dynamicprofile
enum LifeCyclePages {
    struct OnActivate: LanguageModelSession.DynamicProfile {
      var body: some LanguageModelSession.DynamicProfile {
        Profile {
          Instructions("You are a helpful assistant.")
        }
        .onActivate {
          activeProfile = "assistant"
        }
      }
    }

    struct OnDeactivate: LanguageModelSession.DynamicProfile {
      var body: some LanguageModelSession.DynamicProfile {
        Profile {
          Instructions("You are a helpful assistant.")
        }
        .onDeactivate {
          activeProfile = nil
        }
      }
    }

    struct OnPrompt: LanguageModelSession.DynamicProfile {
      var body: some LanguageModelSession.DynamicProfile {
        Profile {
          Instructions("You are a helpful assistant.")
        }
        .onPrompt {
          promptCount += 1
        }
      }
    }

    struct OnPromptWithPrompt: LanguageModelSession.DynamicProfile {
      var body: some LanguageModelSession.DynamicProfile {
        Profile {
          Instructions("You are a helpful assistant.")
        }
        .onPrompt { prompt in
          print("prompt: \(prompt)")
          promptCount += 1
        }
      }
    }

    nonisolated(unsafe) static var reasoningCount = 0

    // .../dynamicprofile/onreasoning(perform:), a page of a later SDK than the Xcode 27 beta.
    struct OnReasoning: LanguageModelSession.DynamicProfile {
      var body: some LanguageModelSession.DynamicProfile {
        Profile {
          Instructions("You are a helpful assistant.")
        }
        .onReasoning {
          reasoningCount += 1
        }
      }
    }

    struct OnResponse: LanguageModelSession.DynamicProfile {
      var body: some LanguageModelSession.DynamicProfile {
        Profile {
          Instructions("You are a helpful assistant.")
        }
        .onResponse {
          completedTasks += 1
        }
      }
    }

    struct OnToolCall: LanguageModelSession.DynamicProfile {
      var body: some LanguageModelSession.DynamicProfile {
        Profile {
          Instructions("You are a helpful assistant.")
          SomeTool()
        }
        .onToolCall {
          toolCallCount += 1
        }
      }
    }

    struct OnToolOutput: LanguageModelSession.DynamicProfile {
      var body: some LanguageModelSession.DynamicProfile {
        Profile {
          Instructions("You are a helpful assistant.")
          SomeTool()
        }
        .onToolOutput {
          toolOutputCount += 1
        }
      }
    }
}

// https://developer.apple.com/documentation/foundationmodels/languagemodelsession/profile
enum ProfilePage {
    struct Creative: LanguageModelSession.DynamicProfile {
        var likesPoetry = false
        var likesAstronomy = true

        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                // Custom instructions and tools for a creative task.
            }
            // Use a higher creative temperature value when a person likes poetry.
            .temperature(likesPoetry ? 0.8 : 0.1)
            // Perform deeper reasoning when a person likes astronomy.
            .reasoningLevel(likesAstronomy ? .deep : .light)
        }
    }

    struct Logging: LanguageModelSession.DynamicProfile {
        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                // Custom instructions and tools for the task.
            }
            .onToolOutput { toolCall, output in
                // Runs after the tool to log any necessary activity.
            }
        }
    }
}

// https://developer.apple.com/documentation/foundationmodels/sessionpropertyvalues
// (The page assigns `Array(history.suffix(50))`; the history is an ArraySlice in the Xcode 27
// interface, as the article above writes it, so this one call is `ArraySlice(...)` here.)
enum SessionPropertyValuesPage {
    struct CompactingProfile: LanguageModelSession.DynamicProfile {
        @SessionProperty(\.history)
        var history

        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                // Custom instructions and tools that you define.
            }
            .onResponse { _ in
                // Compact the history when the entries exceed a certain limit.
                if history.count > 100 {
                    history = ArraySlice(history.suffix(50))
                }
            }
        }
    }
}

// https://developer.apple.com/documentation/foundationmodels/optimizing-key-value-caching-in-language-model-sessions
enum KeyValueCaching {
    static func prewarmedSession() {
        let session = LanguageModelSession(
            tools: [RecipeDatabaseTool()],
            instructions: """
                You are a helpful cooking assistant. Suggest recipes \
                based on available ingredients and dietary preferences.
                """
        )

        // Perform a key-value cache computation for the instructions, tools, and the
        // provided prefix before sending the person's request.
        session.prewarm(
            promptPrefix: "Suggest a recipe using"
        )
    }

    struct PresentationInstructions: DynamicInstructions {
        var isEditingImage: Bool = false

        var body: some DynamicInstructions {
            // Static elements that are always present and cached across turns.
            Instructions {
                "You help create presentations."
            }
            ListSlidesTool()
            AddSlideTool()

            // Place a conditional at the end to minimize invalidation
            // when an event toggles it.
            if isEditingImage {
                ImageEditingInstructions()
            }
        }
    }

    struct DebugFreeProfile: LanguageModelSession.DynamicProfile {
        var body: some LanguageModelSession.DynamicProfile {
            Profile {
               // The instructions and tools for the profile.
            }
            .historyTransform { history in
                // Remove debug text from the history. The model sees the same number of
                // entries in the same order so previously cached tokens remain valid.
                clearDebugFromHistory(history)
            }
        }
    }

    struct CompressingProfile: LanguageModelSession.DynamicProfile {
        // Define a session property to access the history for the session.
        @SessionProperty(\.history)
        var history

        var body: some LanguageModelSession.DynamicProfile {
            Profile {
                // The instructions and tools for the profile.
            }
            .onResponse {
                // Compress the history and incur the cache invalidation on the next request.
                if history.count > 100 {
                    history = history.suffix(50)
                }
            }
        }
    }

    static func restoredSession(_ saved: Transcript) {
        let transcript = saved // Load a transcript you save from a previous conversation.
        let session = LanguageModelSession(
            transcript: transcript
        )

        // Begin rebuilding the cache before the person's next prompt arrives --- at
        // least one to two seconds in the future.
        session.prewarm()
    }
}

// https://developer.apple.com/documentation/foundationmodels/imagereference (the page reads the
// image as `imageAttachment.cgImage`; Linux has no CoreGraphics, so this reads its URL).
enum ImageReferencePage {
    enum ImageToolError: Error { case imageNotFound(String) }

    struct MyTool: Tool {
      let description = "Describes an image of the conversation."
      @SessionProperty(\.history) var history

      @Generable
      struct Arguments {
        var image: ImageReference
      }

      public func call(arguments: Arguments) async throws -> String {
        guard let imageAttachment = arguments.image.resolved(in: history) else {
          throw ImageToolError.imageNotFound(arguments.image.attachmentLabel)
        }
        let image = imageAttachment.url
        return image?.lastPathComponent ?? ""
      }
    }

    static func prompt(first: URL, second: URL) -> Prompt {
        Prompt {
            "Compare these two images:"
            Attachment(imageURL: first)
                .label("image-0")
            Attachment(imageURL: second)
                .label("image-1")
        }
    }
}
