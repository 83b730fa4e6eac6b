#!/usr/bin/env python3
"""Makes the content-tagging data set deterministically: train.jsonl and heldout.jsonl.

The texts are synthetic: short diary entries, messages, social posts, reviews and news snippets
composed from hand-written sentence templates, curated vocabularies and names from Faker. Every
label is known by construction:

- topics:   the topic of each event sentence's template (one of TOPICS)
- emotions: the emotion of each emotion sentence, adverb or emoji added (one of EMOTIONS)
- actions:  the lemma of every verb slot of the event sentences, in order of appearance
- entities: every name filled into an entity slot (people, organizations, places, products,
            titles, events), exactly as written, in order of appearance

The held-out split uses event templates, emotion phrasings, openers, closers and connectives
that never occur in training, and entity values (first names, last names, cities, countries,
brands, titles...) drawn from pools disjoint from the training pools, so it measures
generalization, not memorization. The label vocabularies (topics, emotions) are shared.

Usage: python make_data.py [--train 2000] [--heldout 200] [--out .]
"""
import argparse
import json
import random
import re
import sys

from faker import Faker

SEED = 20250611

TOPICS = ["sports", "technology", "finance", "health", "food", "travel", "politics", "weather",
          "music", "movies", "education", "science", "business", "real estate", "fashion", "gaming",
          "pets", "family", "environment", "crime", "cars", "work", "art"]

EMOTIONS = ["joy", "sadness", "anger", "fear", "surprise", "gratitude", "excitement", "frustration",
            "disappointment", "anxiety", "pride", "relief", "hope", "confusion"]

# ---------------------------------------------------------------------------------------------
# Verbs: lemma -> (past, past participle, -ing). Regular verbs are inflected by rule.

IRREGULAR = {
    "beat": ("beat", "beaten", "beating"), "run": ("ran", "run", "running"), "win": ("won", "won", "winning"),
    "lose": ("lost", "lost", "losing"), "fall": ("fell", "fallen", "falling"), "get": ("got", "gotten", "getting"),
    "quit": ("quit", "quit", "quitting"), "eat": ("ate", "eaten", "eating"), "fly": ("flew", "flown", "flying"),
    "see": ("saw", "seen", "seeing"), "sing": ("sang", "sung", "singing"), "buy": ("bought", "bought", "buying"),
    "sell": ("sold", "sold", "selling"), "pay": ("paid", "paid", "paying"), "build": ("built", "built", "building"),
    "cut": ("cut", "cut", "cutting"), "withdraw": ("withdrew", "withdrawn", "withdrawing"),
    "take": ("took", "taken", "taking"), "feed": ("fed", "fed", "feeding"), "find": ("found", "found", "finding"),
    "throw": ("threw", "thrown", "throwing"), "drive": ("drove", "driven", "driving"),
    "wear": ("wore", "worn", "wearing"), "sew": ("sewed", "sewn", "sewing"), "draw": ("drew", "drawn", "drawing"),
    "teach": ("taught", "taught", "teaching"), "rise": ("rose", "risen", "rising"), "hit": ("hit", "hit", "hitting"),
    "speedrun": ("speedran", "speedrun", "speedrunning"), "babysit": ("babysat", "babysat", "babysitting"),
    "set": ("set", "set", "setting"), "make": ("made", "made", "making"), "break": ("broke", "broken", "breaking"),
    "swim": ("swam", "swum", "swimming"), "write": ("wrote", "written", "writing"), "reset": ("reset", "reset", "resetting"),
    "seek": ("sought", "sought", "seeking"), "lead": ("led", "led", "leading"),
}
DOUBLING = {"plan", "ban", "knit", "rob", "hug", "stop", "shop", "drop", "submit", "jog", "chat", "scan", "grab",
            "swap", "trim", "skip", "admit", "commit", "regret", "tap", "map", "stir"}


def inflect(lemma):
    if lemma in IRREGULAR:
        return IRREGULAR[lemma]
    if lemma in DOUBLING:
        stem = lemma + lemma[-1]
        return stem + "ed", stem + "ed", stem + "ing"
    if lemma.endswith("e"):
        ing = lemma + "ing" if lemma.endswith("ee") else lemma[:-1] + "ing"
        return lemma + "d", lemma + "d", ing
    if lemma.endswith("y") and lemma[-2] not in "aeiou":
        return lemma[:-1] + "ied", lemma[:-1] + "ied", lemma + "ing"
    return lemma + "ed", lemma + "ed", lemma + "ing"


# ---------------------------------------------------------------------------------------------
# Event templates, by topic: (train, held-out). Slots:
#   {S} subject, {POSS} its possessive, {V:lemma} a verb in the sentence's tense (past or future),
#   {V:lemma|past|pp|ing|base} a fixed form; entity slots in ENTITY_SLOTS; {DAY} {MONTH} {NUM}
#   {PRICE} {SCORE} are not entities. A leading "1:" restricts a template to first-person texts.

EVENTS = {
    "sports": ([
        "{TEAM} {V:beat} {TEAM2} {SCORE} in front of a packed stadium.",
        "{S} {V:run} the {MARATHON} with a few friends.",
        "{PERSON} {V:score} twice as {TEAM} {V:win} the cup final.",
        "{S} {V:join} a weekend soccer league.",
        "{TEAM} {V:sign} {PERSON} on a two-year contract.",
        "{S} {V:train} at the track every morning before the {MARATHON}.",
        "{TEAM} {V:lose} to {TEAM2} after extra time.",
        "1:I {V:watch|past} the derby at a sports bar with {FIRST}.",
    ], [
        "{PERSON} {V:break} the club record for goals in a single season.",
        "{S} {V:coach} the under-12 basketball team at {SCHOOL}.",
        "{TEAM} {V:fire} their head coach after a poor run of results.",
    ]),
    "technology": ([
        "{COMPANY} {V:launch} the {PRODUCT}, a phone with a foldable screen.",
        "{S} {V:install} the latest update on {POSS} laptop.",
        "{COMPANY} {V:release} a security patch for its {APP} app.",
        "{S} {V:upgrade|past} to the {PRODUCT} last weekend.",
        "{S} {V:build} a small website for {POSS} cousin's bakery.",
        "{S} {V:delete} {APP} from {POSS} phone.",
        "{COMPANY} {V:unveil} a new AI chip at its developer conference.",
        "{S} {V:reset} {POSS} router and {V:fix} the wifi.",
    ], [
        "{S} {V:test} the beta version of {APP} on {POSS} tablet.",
        "{COMPANY} {V:recall} thousands of {PRODUCT} chargers over overheating fears.",
        "{S} {V:code} a browser extension over the weekend.",
    ]),
    "finance": ([
        "{S} {V:invest} {PRICE} in an index fund.",
        "{S} {V:pay} off the last of {POSS} student loan.",
        "{BANK} {V:raise} interest rates on savings accounts.",
        "{S} {V:borrow} {PRICE} from {BANK}.",
        "{S} {V:save} {PRICE} this year with a strict budget.",
        "Shares of {COMPANY} {V:fall} eight percent after weak earnings.",
        "{S} {V:open} a retirement account with {BANK}.",
        "{S} {V:transfer} {PRICE} to {POSS} brother.",
    ], [
        "{S} {V:withdraw} {PRICE} in cash from {BANK}.",
        "{COMPANY} {V:cut} its dividend for the first time in a decade.",
        "{S} {V:refinance} {POSS} debt with {BANK}.",
    ]),
    "health": ([
        "{S} {V:visit} the doctor at {HOSPITAL} about {POSS} back pain.",
        "{S} {V:start} a new workout plan with three runs a week.",
        "{S} {V:recover} from the flu after a week in bed.",
        "{HOSPITAL} {V:open} a new cancer ward.",
        "{S} {V:quit} smoking after twenty years.",
        "{S} {V:get} a flu shot at the pharmacy on {STREET}.",
        "{S} {V:sprain} {POSS} ankle on the stairs.",
        "{S} {V:meditate} for ten minutes every morning.",
    ], [
        "{S} {V:schedule} a knee surgery at {HOSPITAL}.",
        "{S} {V:lose} twelve pounds on a new diet.",
        "Doctors at {HOSPITAL} {V:treat} dozens of patients for heat stroke.",
    ]),
    "food": ([
        "{S} {V:bake} sourdough bread for the first time.",
        "{S} {V:try} the ramen at {RESTAURANT}.",
        "{S} {V:cook} a three-course dinner for {FIRST}.",
        "{RESTAURANT} {V:add} vegan tacos to its menu.",
        "{S} {V:order} way too much pizza from {RESTAURANT}.",
        "{S} {V:grill} burgers in the backyard.",
        "{S} {V:taste} every cheese at the {FOODFEST}.",
    ], [
        "{S} {V:eat} at {RESTAURANT} and {V:share} a huge dessert.",
        "{RESTAURANT} {V:close} its doors after thirty years in business.",
        "{S} {V:brew} a batch of ginger beer at home.",
    ]),
    "travel": ([
        "{S} {V:fly} to {CITY} for a long weekend.",
        "{S} {V:book} a cabin near {CITY} for {MONTH}.",
        "{S} {V:visit} {COUNTRY} with {FIRST}.",
        "{S} {V:pack} {POSS} bags for a road trip to {CITY}.",
        "1:Our flight to {CITY} was {V:delay|pp} for six hours.",
        "{S} {V:explore} the old town of {CITY} on foot.",
        "{S} {V:rent} a camper van and {V:drive} along the coast.",
        "{S} {V:cancel} the trip to {COUNTRY}.",
    ], [
        "{S} {V:backpack} across {COUNTRY} for a month.",
        "{S} {V:land} in {CITY} just before midnight.",
        "{S} {V:stay} at a tiny hotel in {CITY}.",
    ]),
    "politics": ([
        "{S} {V:vote} in the local election on {DAY}.",
        "{PERSON} {V:announce} a run for mayor of {CITY}.",
        "The {COUNCIL} {V:approve} a new transit budget.",
        "Hundreds {V:protest} outside the parliament in {CITY}.",
        "The {PARTY} {V:win} a majority in {COUNTRY}.",
        "{PERSON} {V:resign} as leader of the {PARTY}.",
        "Lawmakers {V:pass} a voting rights bill.",
        "{S} {V:sign} a petition against the new tax.",
    ], [
        "{PERSON} {V:debate} {PERSON2} on live television.",
        "The {PARTY} {V:elect} {PERSON} as its new leader.",
        "Voters in {CITY} {V:reject} the proposed tax increase.",
    ]),
    "weather": ([
        "A powerful storm {V:hit} {CITY} overnight.",
        "Heavy snow {V:close} roads across {CITY}.",
        "{S} {V:shovel} snow for two hours.",
        "Forecasters {V:warn} of a heatwave in {CITY}.",
        "Floodwaters {V:damage} dozens of homes in {CITY}.",
        "{S} {V:cancel} the picnic because of the rain.",
        "Officials {V:evacuate} coastal towns ahead of the hurricane.",
    ], [
        "Hail {V:smash} car windows across {CITY}.",
        "{S} {V:wait} out the thunderstorm in a cafe.",
        "Strong winds {V:knock} out power to {CITY}.",
    ]),
    "music": ([
        "{BAND} {V:release} a new album called {ALBUM}.",
        "{S} {V:see} {BAND} live at the {MUSICFEST}.",
        "{S} {V:learn} three new songs on the guitar.",
        "{BAND} {V:cancel} the rest of their tour.",
        "{S} {V:sing} at an open mic night in {CITY}.",
        "{PERSON} {V:perform} a sold-out show in {CITY}.",
        "{S} {V:buy} tickets for the {BAND} concert.",
    ], [
        "{S} {V:record} a cover song in {POSS} bedroom studio.",
        "{BAND} {V:headline} the {MUSICFEST}.",
        "{PERSON} {V:compose} the soundtrack for {MOVIE}.",
    ]),
    "movies": ([
        "{S} {V:watch} {MOVIE} at the cinema.",
        "{PERSON} {V:direct} {MOVIE}.",
        "{MOVIE} {V:win} best picture at the {FILMFEST}.",
        "{S} {V:rewatch} {MOVIE} with {FIRST}.",
        "{STUDIO} {V:delay} the release of {MOVIE}.",
        "{PERSON} {V:star} in {MOVIE}.",
        "{S} {V:review} {MOVIE} for the school paper.",
    ], [
        "{S} {V:binge} all of {SHOW} in one weekend.",
        "{STUDIO} {V:film} scenes for {MOVIE} in {CITY}.",
        "{S} {V:walk} out of {MOVIE} halfway through.",
    ]),
    "education": ([
        "{S} {V:graduate} from {SCHOOL}.",
        "{S} {V:study} for the history exam all night.",
        "{S} {V:enroll} in a night class at {SCHOOL}.",
        "{SCHOOL} {V:hire} {NUM} new teachers.",
        "{S} {V:fail} the math final.",
        "{PERSON} {V:teach} a coding workshop at {SCHOOL}.",
        "{S} {V:apply} to {SCHOOL} and {SCHOOL2}.",
        "{S} {V:submit} {POSS} thesis a week early.",
    ], [
        "{S} {V:pass} the bar exam on the first try.",
        "{SCHOOL} {V:cancel} classes for the rest of the week.",
        "{S} {V:tutor} kids in reading at {SCHOOL}.",
    ]),
    "science": ([
        "Researchers at {SCHOOL} {V:discover} a new species of frog.",
        "{PERSON} {V:publish} a study on ocean currents.",
        "The {SPACEAGENCY} {V:launch} a probe toward the outer planets.",
        "{S} {V:observe} a meteor shower from the roof.",
        "Scientists {V:sequence} the genome of an ancient wheat.",
        "{S} {V:visit} the planetarium at the {MUSEUM}.",
        "A team at {SCHOOL} {V:test} a new malaria vaccine.",
    ], [
        "{PERSON} {V:measure} the speed of a new laser.",
        "Astronomers {V:detect} a signal from a distant galaxy.",
        "{S} {V:build} a telescope with {POSS} nephew.",
    ]),
    "business": ([
        "{COMPANY} {V:acquire} {COMPANY2} for {PRICE} million.",
        "{COMPANY} {V:cut} 200 jobs.",
        "{S} {V:open} a coffee shop on {STREET}.",
        "{COMPANY} {V:report} record profits this quarter.",
        "{COMPANY} {V:merge} with {COMPANY2}.",
        "{S} {V:launch} an online store for handmade candles.",
        "{PERSON} {V:found} {COMPANY} in a garage.",
        "{COMPANY} {V:expand} into {COUNTRY}.",
    ], [
        "{COMPANY} {V:sue} {COMPANY2} over a patent.",
        "{PERSON} {V:invest} in {COMPANY} through a seed round.",
        "{COMPANY} {V:relocate} its headquarters to {CITY}.",
    ]),
    "real estate": ([
        "{S} {V:buy} a two-bedroom condo in {CITY}.",
        "{S} {V:sell} the house on {STREET}.",
        "{S} {V:rent} a studio apartment near downtown.",
        "{S} {V:move} into a bigger place in {CITY}.",
        "Home prices in {CITY} {V:rise} for the ninth month in a row.",
        "{S} {V:renovate} the kitchen of {POSS} old house.",
        "{S} {V:sign} a lease for an office on {STREET}.",
    ], [
        "{S} {V:list} the farmhouse for sale with {COMPANY}.",
        "{S} {V:tour} three apartments in {CITY}.",
        "Developers {V:demolish} an old mall on {STREET}.",
    ]),
    "fashion": ([
        "{S} {V:wear} a vintage jacket to the gala.",
        "{PERSON} {V:design} a new line for {FASHIONBRAND}.",
        "{S} {V:buy} new sneakers from {FASHIONBRAND}.",
        "{FASHIONBRAND} {V:unveil} its spring collection in {CITY}.",
        "{S} {V:sew} a dress for the first time.",
        "{S} {V:return} the boots to {STORE}.",
        "{PERSON} {V:model} for {FASHIONBRAND} during fashion week.",
    ], [
        "{S} {V:knit} a scarf for {FIRST}.",
        "{FASHIONBRAND} {V:open} a flagship boutique in {CITY}.",
        "{S} {V:donate} a bag of old clothes.",
    ]),
    "gaming": ([
        "{S} {V:play} {GAME} until 3 a.m.",
        "{GAMESTUDIO} {V:release} {GAME} for consoles.",
        "{S} {V:beat} the final boss in {GAME}.",
        "{S} {V:stream} {GAME} for six hours.",
        "{S} {V:download} {GAME} on {POSS} new console.",
        "{GAMESTUDIO} {V:patch} the save bug in {GAME}.",
        "{S} {V:reach} level 50 in {GAME}.",
    ], [
        "{S} {V:preorder} {GAME} from {STORE}.",
        "{GAMESTUDIO} {V:delay} {GAME} until next year.",
        "{S} {V:speedrun} {GAME} in under an hour.",
    ]),
    "pets": ([
        "{S} {V:adopt} a rescue dog from the shelter.",
        "{S} {V:take} the cat to the vet.",
        "{S} {V:walk} the dog around {PARK}.",
        "{S} {V:feed} the neighbor's rabbits.",
        "{S} {V:train} {POSS} puppy with treats.",
        "{S} {V:groom} the dog before the show.",
        "The cat {V:knock} a glass off the table.",
    ], [
        "{S} {V:foster} two kittens for the shelter.",
        "{S} {V:bathe} the dog after a muddy hike.",
        "{S} {V:find} a lost parrot in {PARK}.",
    ]),
    "family": ([
        "{S} {V:celebrate} grandma's 90th birthday.",
        "{PERSON} {V:marry} {PERSON2} in a small ceremony.",
        "{S} {V:visit} {POSS} parents in {CITY}.",
        "{S} {V:host} a family dinner for twelve relatives.",
        "{S} {V:welcome} a baby girl named {FIRSTF}.",
        "{S} {V:babysit} {POSS} nephew all afternoon.",
        "{S} {V:reunite} with {POSS} cousins after ten years.",
    ], [
        "{S} {V:plan} a surprise party for {POSS} mom.",
        "{S} {V:throw} a baby shower for {FIRST}.",
        "{S} {V:hug} {POSS} grandpa at the airport.",
    ]),
    "environment": ([
        "Volunteers {V:plant} 500 trees along the river in {CITY}.",
        "{S} {V:recycle} all the plastic from the party.",
        "The {COUNCIL} {V:ban} single-use plastic bags.",
        "{S} {V:clean} up trash at {BEACH}.",
        "{COMPANY} {V:pledge} net-zero emissions by 2040.",
        "{S} {V:install} solar panels on the roof.",
        "{S} {V:compost} kitchen scraps in the garden.",
    ], [
        "Activists {V:block} a pipeline site near {CITY}.",
        "{S} {V:collect} litter along the shore of {BEACH}.",
        "{COMPANY} {V:restore} wetlands outside {CITY}.",
    ]),
    "crime": ([
        "Police {V:arrest} a man after a break-in on {STREET}.",
        "1:Someone {V:steal|past} my bike from outside the gym.",
        "The {POLICE} {V:investigate} a string of burglaries.",
        "Thieves {V:rob} a jewelry store in {CITY}.",
        "{PERSON} was {V:charge|pp} with fraud.",
        "A judge {V:sentence} {PERSON} to five years in prison.",
        "1:I {V:report|past} the stolen wallet to the {POLICE}.",
    ], [
        "Detectives {V:question} two suspects in the {CITY} robbery.",
        "Police {V:seize} a large stash of counterfeit cash.",
        "{PERSON} {V:plead} guilty to tax evasion.",
    ]),
    "cars": ([
        "{S} {V:buy} a used {CAR}.",
        "{S} {V:drive} the {CAR} from {CITY} to {CITY2}.",
        "{CARMAKER} {V:recall} 40,000 SUVs over faulty brakes.",
        "{S} {V:repair} the brakes on {POSS} old truck.",
        "{S} {V:lease} a {CAR} for three years.",
        "A mechanic at {GARAGE} {V:replace} the transmission.",
        "{S} {V:wash} the car on {DAY}.",
    ], [
        "{S} {V:trade} in {POSS} sedan for a {CAR}.",
        "{CARMAKER} {V:unveil} an electric pickup at the auto show.",
        "{S} {V:crash} {POSS} scooter into a hedge.",
    ]),
    "work": ([
        "{S} {V:quit} {POSS} job at {COMPANY}.",
        "{COMPANY} {V:promote} {PERSON} to head of sales.",
        "{S} {V:interview} for a job at {COMPANY}.",
        "{S} {V:finish} the quarterly report at midnight.",
        "{S} {V:ask} {POSS} boss for a raise.",
        "{S} {V:start} a new job at {COMPANY} on {DAY}.",
        "{COMPANY} {V:hire} {PERSON} as chief engineer.",
        "{S} {V:present} the project to the whole team.",
    ], [
        "{S} {V:negotiate} a four-day week with {COMPANY}.",
        "{S} {V:mentor} two interns this summer.",
        "{S} {V:resign} from {COMPANY} after five years.",
    ]),
    "art": ([
        "{S} {V:paint} a portrait of {FIRST}.",
        "The {MUSEUM} {V:exhibit} sculptures by {PERSON}.",
        "{S} {V:draw} sketches of the harbor in {CITY}.",
        "{PERSON} {V:sell} a painting for {PRICE}.",
        "{S} {V:visit} the new show at the {MUSEUM}.",
        "{S} {V:sculpt} a clay vase in a pottery class.",
        "The {MUSEUM} {V:acquire} a rare sketch by {PERSON}.",
    ], [
        "{S} {V:photograph} street murals across {CITY}.",
        "{PERSON} {V:unveil} a mural on {STREET}.",
        "{S} {V:frame} {POSS} first watercolor.",
    ]),
}

# Emotion phrasings: (first-person sentences, third-person sentences, sentence adverbs), by split.
EMOTION_TEXT = {
    "joy": ((["I'm so happy right now.", "Honestly this made my whole week.", "Best day in ages!", "I couldn't stop smiling."],
             ["Fans were overjoyed.", "The crowd was delighted."], ["Happily"]),
            (["Pure happiness today.", "I'm over the moon."], ["Supporters were jubilant."], ["Joyfully"])),
    "sadness": ((["I feel really down about it.", "It broke my heart.", "Not gonna lie, I cried a little.", "Feeling pretty low tonight."],
                 ["The family said they were heartbroken.", "Neighbors were in mourning."], ["Sadly"]),
                (["It's been a sad week.", "I miss how things were."], ["Friends described a deep sense of grief."], ["Tragically"])),
    "anger": ((["I'm absolutely furious.", "This makes me so mad.", "Unbelievable. I'm livid."],
               ["Many customers were angry.", "Residents were outraged."], ["Outrageously"]),
              (["I am fuming right now.", "Seriously angry about this."], ["Locals were furious."], ["Infuriatingly"])),
    "fear": ((["I'm scared of what comes next.", "Honestly terrified.", "It frightened me a lot."],
              ["Neighbors said they were afraid.", "Many families were frightened."], ["Frighteningly"]),
             (["I was shaking with fear.", "That scared me half to death."], ["Witnesses described feeling terrified."], ["Scarily"])),
    "surprise": ((["I did not see that coming!", "Wow, what a shock.", "Totally caught me off guard."],
                  ["Residents said they were shocked.", "The news stunned observers."], ["Surprisingly"]),
                 (["I was stunned.", "Never expected that at all!"], ["Even insiders were astonished."], ["Shockingly"])),
    "gratitude": ((["So thankful for everyone who helped.", "Huge thanks to all of you.", "I'm really grateful."],
                   ["Organizers said they were grateful to volunteers.", "Families expressed their gratitude."], ["Gratefully"]),
                  (["Can't thank them enough.", "I appreciate it so much."], ["The team was deeply thankful for the support."], ["Appreciatively"])),
    "excitement": ((["I can't wait!", "So pumped for this!", "I'm buzzing with excitement."],
                    ["\"We are thrilled,\" said {PERSON}.", "Fans were buzzing with excitement."], ["Excitingly"]),
                   (["Counting down the days!", "This is going to be epic, I'm thrilled."], ["Supporters were giddy with anticipation."], ["Thrillingly"])),
    "frustration": ((["This is so frustrating.", "I'm fed up with it.", "Third time this month, ugh."],
                     ["Commuters voiced frustration.", "Parents said they were fed up."], ["Frustratingly"]),
                    (["I'm at my wit's end.", "Nothing works and I'm sick of it."], ["Residents were exasperated."], ["Annoyingly"])),
    "disappointment": ((["What a letdown.", "I expected so much more.", "Pretty disappointing, to be honest."],
                        ["Critics called the result disappointing.", "Fans were disappointed."], ["Unfortunately"]),
                       (["Not worth the hype.", "I'm let down, honestly."], ["Backers were left disappointed."], ["Disappointingly"])),
    "anxiety": ((["I'm so nervous about it.", "Can't sleep, too worried.", "My stomach is in knots."],
                 ["Parents said they were anxious.", "Many employees were worried."], ["Worryingly"]),
                (["I keep worrying about it.", "Feeling really anxious tonight."], ["Shop owners were uneasy."], ["Nervously"])),
    "pride": ((["I'm so proud of us.", "Proud moment for the whole family.", "Feeling pretty proud of myself."],
               ["Supporters said they were proud.", "\"I am so proud of this team,\" said {PERSON}."], ["Proudly"]),
              (["Couldn't be prouder.", "Proud doesn't even cover it."], ["Local leaders were beaming with pride."], ["With great pride"])),
    "relief": ((["What a relief.", "Phew, finally sorted.", "I can breathe again."],
                ["Officials expressed relief.", "Residents were relieved."], ["Thankfully"]),
               (["Such a weight off my shoulders.", "So relieved it's over."], ["Families breathed a sigh of relief."], ["Luckily"])),
    "hope": ((["Fingers crossed it works out.", "I'm hopeful about it.", "Here's hoping for the best."],
              ["Locals are hopeful.", "Supporters remain optimistic."], ["Hopefully"]),
             (["I have a good feeling about this.", "Staying optimistic."], ["Campaigners sounded hopeful."], ["Optimistically"])),
    "confusion": ((["I'm so confused.", "Honestly no idea what happened.", "Can someone explain this to me?"],
                   ["Many were left confused by the decision.", "Customers were puzzled."], ["Confusingly"]),
                  (["None of it makes sense to me.", "I'm baffled."], ["Even experts were perplexed."], ["Bafflingly"])),
}
# More training phrasings (first person, third person, adverbs), none of them in the held-out split.
MORE_TRAIN_EMOTION_TEXT = {
    "joy": (["Such a lovely day.", "Feeling fantastic.", "Grinning ear to ear.", "Happiest I've been in a while."],
            ["Families were cheerful.", "\"This is a happy day,\" said {PERSON}."], ["Delightfully"]),
    "sadness": (["Such a sad day.", "Really bummed out.", "My heart is heavy tonight.", "It hurts, honestly."],
                ["Mourners gathered in sorrow.", "\"We are devastated,\" said {PERSON}."], ["Heartbreakingly"]),
    "anger": (["I'm so angry I could scream.", "Absolutely unacceptable. I'm furious.", "This is infuriating.", "Ready to yell at someone."],
              ["Fans reacted with fury.", "\"This is outrageous,\" said {PERSON}."], ["Maddeningly"]),
    "fear": (["Really scary stuff.", "I'm afraid to even look.", "My hands were trembling.", "Honestly it was terrifying."],
             ["The town was gripped by fear.", "Witnesses were scared."], ["Terrifyingly"]),
    "surprise": (["Plot twist!", "Wait, what?!", "Didn't expect that one.", "Jaw on the floor."],
                 ["The announcement took everyone by surprise.", "Observers were caught off guard."], ["Unexpectedly"]),
    "gratitude": (["Thank you so much, everyone.", "Forever grateful.", "So thankful.", "Big thanks to my friends."],
                  ["\"We are so grateful,\" said {PERSON}.", "Residents expressed thanks to the volunteers."], []),
    "excitement": (["Yes!! Finally!", "So excited!", "This is going to be amazing!", "Can hardly sit still."],
                   ["Excitement is building among fans.", "Supporters were thrilled."], []),
    "frustration": (["Ugh, again?!", "So annoying.", "Why is this so hard?", "I've had it with this."],
                    ["Drivers grew increasingly frustrated.", "\"It is frustrating,\" said {PERSON}."], ["Irritatingly"]),
    "disappointment": (["Kind of a flop.", "I'm disappointed.", "Meh, not great.", "Such a disappointment."],
                       ["Supporters called it a letdown.", "The result left fans disappointed."], ["Regrettably"]),
    "anxiety": (["I'm a nervous wreck.", "Kind of panicking, honestly.", "So much stress right now.", "I can't stop overthinking it."],
                ["Concern is growing among residents.", "\"We are worried,\" said {PERSON}."], []),
    "pride": (["So proud!", "Proud of every single one of us.", "We did it, and I'm proud.", "Feeling proud today."],
              ["The school was proud of its students.", "Proud parents filled the hall."], []),
    "relief": (["Relieved, honestly.", "Finally, all good.", "That's a load off.", "Glad that's over."],
               ["A sense of relief spread through town.", "\"We are relieved,\" said {PERSON}."], ["Fortunately"]),
    "hope": (["Hoping for the best.", "Hopeful for next time.", "Maybe things will turn around.", "I really hope this works."],
             ["Residents hope for a quick recovery.", "Organizers are optimistic."], []),
    "confusion": (["Wait, I don't get it.", "What is going on?", "Totally lost here.", "I'm puzzled."],
                  ["Residents were confused."], ["Puzzlingly"]),
}
for _e, (_first, _third, _adverbs) in MORE_TRAIN_EMOTION_TEXT.items():
    _train, _held = EMOTION_TEXT[_e]
    EMOTION_TEXT[_e] = ((_train[0] + _first, _train[1] + _third, _train[2] + _adverbs), _held)
    assert not set(_first + _third + _adverbs) & set(_held[0] + _held[1] + _held[2]), _e
EMOJI = {"joy": "\U0001F60A", "sadness": "\U0001F622", "anger": "\U0001F621", "fear": "\U0001F631", "surprise": "\U0001F62E",
         "gratitude": "\U0001F64F", "excitement": "\U0001F389", "frustration": "\U0001F624", "disappointment": "\U0001F61E",
         "anxiety": "\U0001F62C", "pride": "\U0001F4AA", "relief": "\U0001F60C", "hope": "\U0001F91E", "confusion": "\U0001F615"}

# Genre wrappers by split. Openers/closers hold no labels except entity slots.
GENRE = {
    "train": {
        "diary": (["Dear diary,\n", "Journal, {DAY}.\n", "", "{DAY} night. ", "Morning.\n", "Quick note.\n"],
                  ["", "", " Long day.", " That's all for now.", " Bed now.", " Same old.", " Onward!"]),
        "message": (["Hey! ", "hi all - ", "Quick update: ", "", "Guess what? ", "Hello! ", "FYI: ", "Morning all! ", "So, "],
                    ["", " Ttyl.", " xx", "\n- {FIRST}", " More soon.", " Bye!", " Peace.", " Over and out.", " Thoughts?", " Anyway!"]),
        "post": (["", "PSA: ", "Okay so ", "Life update: ", "Update: ", "Real talk: ", "Random thought: "],
                 ["", "", " #weekend", " Anyway.", " Just saying!", " End of update."]),
        "review": (["{STARS} stars. ", "Review: ", "My honest take: ", "Quick review: ", "Honest opinion: "],
                   ["", " Would not change a thing.", " Just my two cents.", " Take it or leave it.", " Thoughts welcome!"]),
        "news": (["{CITY} - ", "", "BREAKING: ", "Local news: ", "Update: ", "Just in: "],
                 ["", " No further details were available.", " More to follow.", " Details remain scarce.", " More updates soon!"]),
    },
    "heldout": {
        "diary": (["Note to self:\n", "{MONTH} {NUM}.\n", ""], ["", " So yeah."]),
        "message": (["Heads up: ", "Yo, ", ""], ["", " Cheers.", " Later!"]),
        "post": (["", "Story time: "], ["", " Oh well."]),
        "review": (["Rated {STARS}/5. ", "Verdict: "], ["", " Make of that what you will."]),
        "news": (["", "{CITY}, {MONTH} {NUM} - ", "In brief: "], ["", " The story is developing."]),
    },
}
REVIEW_TOPICS = {"food", "technology", "movies", "travel", "cars", "fashion", "gaming", "music", "art"}
CONNECTIVES = {"train": ["Also, ", "Then ", "Meanwhile, ", "On top of that, ", "", ""], "heldout": ["Plus, ", "And ", "Later, ", ""]}
FILLERS = {"train": ["Anyway.", "Long story short.", "Crazy times.", "Oh, and one more thing.", "What a week.", "Right.",
                     "Busy week ahead.", "Anyway!", "FYI.", "Same as always.", "Long week!", "Noted for next time."],
           "heldout": ["So that's that.", "Big week, all in all."]}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]

# ---------------------------------------------------------------------------------------------
# Entity pools, disjoint between the splits.

COUNTRIES = ["Portugal", "Japan", "Canada", "Mexico", "Norway", "Kenya", "Peru", "Vietnam", "Greece", "Iceland", "Chile",
             "Morocco", "Thailand", "Ireland", "Argentina", "Sweden", "Egypt", "Croatia", "Colombia", "Finland", "Spain",
             "Italy", "Germany", "Brazil", "Australia", "India", "Poland", "Austria", "Turkey", "Indonesia",
             # held-out from here
             "Ghana", "Uruguay", "Slovenia", "Mongolia", "Estonia", "Nepal", "Tunisia", "Bolivia", "Latvia", "Jordan",
             "Malta", "Namibia", "Paraguay", "Georgia", "Cambodia"]
N_TRAIN_COUNTRIES = 30
SYLLABLES = ["vel", "tro", "zen", "ka", "lum", "ora", "nex", "pix", "quin", "sol", "tav", "rix", "mo", "dex", "ly", "va",
             "cor", "fin", "gal", "bri", "ton", "sy", "ar", "ix", "no", "vo", "ze", "mar", "lo", "ren", "ta", "ko", "vin"]
WORDS = {  # split lists: first part train, rest held-out (split at index given)
    "mascot": (["Hawks", "Tigers", "Rovers", "Comets", "Miners", "Pirates", "Wolves", "Falcons", "Rangers", "Stallions",
                "Bears", "Sharks", "Kings", "Owls"], ["Otters", "Vipers", "Titans", "Mariners", "Foxes", "Ravens"]),
    "adj": (["Golden", "Silver", "Crimson", "Quiet", "Electric", "Wild", "Hollow", "Velvet", "Midnight", "Broken", "Lucky",
             "Neon", "Paper", "Burning", "Frozen", "Distant"],
            ["Amber", "Restless", "Scarlet", "Gentle", "Iron", "Hidden", "Copper", "Wandering"]),
    "noun": (["Spoon", "Harbor", "Garden", "Signal", "River", "Lantern", "Mirror", "Crown", "Forest", "Engine", "Orchard",
              "Anchor", "Canyon", "Tower", "Meadow", "Comet"],
             ["Compass", "Lighthouse", "Glacier", "Ember", "Voyage", "Falcon", "Thicket", "Beacon"]),
    "plural": (["Lions", "Arrows", "Ghosts", "Rockets", "Sparrows", "Echoes", "Kites", "Drifters", "Saints", "Strangers"],
               ["Pilots", "Monarchs", "Wanderers", "Satellites", "Outlaws"]),
    "model": (["X5", "Pro 14", "Air", "Max", "Ultra", "Mini", "S9", "One", "Edge", "Go"],
              ["Z3", "Plus", "Neo", "Lite", "Prime", "Flex"]),
    "carmodel": (["Atlas", "Comet", "Summit", "Vista", "Ranger", "Nova", "Tempo", "Drift"],
                 ["Sierra", "Orbit", "Quest", "Harbor"]),
    "party": (["Progress Party", "Unity Party", "Liberty Party", "Green Future Party", "Reform Party", "People's Alliance"],
              ["Forward Party", "Common Ground Party", "Heritage Party", "New Dawn Party"]),
}


def unique(gen, n, rng_reject=None, limit=100000):
    out, seen = [], set()
    for _ in range(limit):
        v = gen()
        if v in seen or (rng_reject and rng_reject(v)) or not v.isascii() or "," in v:
            continue
        seen.add(v)
        out.append(v)
        if len(out) == n:
            return out
    raise RuntimeError("pool too small")


def make_pools():
    ftrain = Faker("en_US")
    ftrain.seed_instance(SEED)
    fheld = [Faker(loc) for loc in ("en_GB", "en_IE", "en_NZ")]
    for i, f in enumerate(fheld):
        f.seed_instance(SEED + 1 + i)
    hrng = random.Random(SEED + 7)

    def held(method):
        return lambda: getattr(hrng.choice(fheld), method)()

    pools = {"train": {}, "heldout": {}}
    p, h = pools["train"], pools["heldout"]
    p["first_m"] = unique(ftrain.first_name_male, 150)
    p["first_f"] = unique(ftrain.first_name_female, 150)
    p["last"] = unique(ftrain.last_name, 300)
    p["city"] = unique(ftrain.city, 150)
    used_names = set(p["first_m"]) | set(p["first_f"]) | set(p["last"])
    used_words = used_names | {w for c in p["city"] for w in c.split()}
    h["first_m"] = unique(held("first_name_male"), 50, lambda v: v in used_names)
    h["first_f"] = unique(held("first_name_female"), 50, lambda v: v in used_names)
    h["last"] = unique(held("last_name"), 80, lambda v: v in used_names)
    h["city"] = unique(held("city"), 50, lambda v: v in p["city"] or any(w in used_words for w in v.split()))
    p["country"], h["country"] = COUNTRIES[:N_TRAIN_COUNTRIES], COUNTRIES[N_TRAIN_COUNTRIES:]
    brng = random.Random(SEED + 11)
    brands = unique(lambda: "".join(brng.choice(SYLLABLES) for _ in range(brng.choice([2, 2, 3]))).capitalize(), 120)
    p["brand"], h["brand"] = brands[:90], brands[90:]
    for k, (a, b) in WORDS.items():
        p[k], h[k] = a, b
    return pools


class Filler:
    """Fills the slots of one record from one split's pools and remembers the entities."""

    def __init__(self, rng, pools):
        self.rng, self.p = rng, pools
        self.entities = []

    def c(self, key):
        return self.rng.choice(self.p[key])

    def person(self, female=None):
        if female is None:
            female = self.rng.random() < 0.5
        return self.c("first_f" if female else "first_m") + " " + self.c("last"), female

    def entity(self, slot):
        r, c = self.rng, self.c
        base = re.sub(r"\d+$", "", slot)
        if base == "PERSON":
            v = self.person()[0]
        elif base == "FIRST":
            v = c("first_f") if r.random() < 0.5 else c("first_m")
        elif base == "FIRSTF":
            v = c("first_f")
        elif base == "CITY":
            v = c("city")
        elif base == "COUNTRY":
            v = c("country")
        elif base == "COMPANY":
            v = r.choice([c("last") + " " + r.choice(["Group", "Labs", "Systems", "Partners", "Industries", "Logistics", "Media", "Energy", "Foods"]),
                          c("brand") + r.choice(["", " Inc.", " Technologies", " Corp"])]).strip()
        elif base == "BANK":
            v = r.choice([c("last") + " Bank", "First " + c("city") + " Bank", c("city") + " Credit Union"])
        elif base == "PRODUCT":
            v = c("brand") + " " + c("model")
        elif base == "APP":
            v = c("brand") + r.choice(["", "", " Pay", " Notes", " Chat"])
        elif base == "TEAM":
            v = c("city") + " " + c("mascot")
        elif base == "STORE":
            v = r.choice([c("last") + "'s Hardware", c("brand") + " Electronics", c("last") + " Books", c("brand") + " Outlet"])
        elif base == "RESTAURANT":
            v = r.choice([c("last") + "'s Kitchen", "The " + c("adj") + " " + c("noun"), "Cafe " + c("brand"), c("last") + "'s Diner"])
        elif base == "BAND":
            v = "The " + c("adj") + " " + c("plural")
        elif base in ("MOVIE", "SHOW", "ALBUM", "GAME"):
            v = r.choice(["The " + c("noun") + " of " + c("noun"), c("adj") + " " + c("noun"), c("noun") + " " + c("plural")]) \
                if base != "GAME" else r.choice([c("adj") + " " + c("noun"), c("noun") + " " + c("plural"), c("brand") + " Quest"])
            if base == "MOVIE" and v.startswith("The ") and r.random() < 0.3:
                v = c("adj") + " " + c("plural")
        elif base == "MARATHON":
            v = c("city") + r.choice([" Marathon", " Half Marathon"])
        elif base == "FOODFEST":
            v = c("city") + " Food Festival"
        elif base == "MUSICFEST":
            v = r.choice([c("city") + " Jazz Festival", c("brand") + "fest"])
        elif base == "FILMFEST":
            v = c("city") + " Film Festival"
        elif base == "SCHOOL":
            v = r.choice([c("last") + " University", c("city") + " Community College", c("last") + " High School", "University of " + c("city")])
        elif base == "COUNCIL":
            v = c("city") + " City Council"
        elif base == "POLICE":
            v = c("city") + " Police Department"
        elif base == "PARTY":
            v = c("party")
        elif base == "HOSPITAL":
            v = r.choice([c("last") + " Memorial Hospital", c("city") + " General Hospital"])
        elif base == "STREET":
            v = r.choice([c("last") + " Street", c("last") + " Avenue", c("last") + " Road", c("noun") + " Lane"])
        elif base == "MUSEUM":
            v = r.choice([c("city") + " Museum of Art", c("last") + " Gallery", c("city") + " Science Museum"])
        elif base == "PARK":
            v = c("last") + " Park"
        elif base == "BEACH":
            v = c("last") + " Beach"
        elif base == "CAR":
            v = c("brand") + " " + c("carmodel")
        elif base == "CARMAKER":
            v = c("brand") + r.choice(["", " Motors"])
        elif base == "GARAGE":
            v = c("last") + "'s Auto"
        elif base == "FASHIONBRAND":
            v = r.choice(["House of " + c("last"), c("brand"), c("last") + " & " + c("last")])
        elif base == "STUDIO":
            v = r.choice([c("last") + " Pictures", c("brand") + " Studios"])
        elif base == "GAMESTUDIO":
            v = r.choice([c("brand") + " Games", c("last") + " Interactive"])
        elif base == "SPACEAGENCY":
            v = c("brand") + " Space Agency"
        else:
            raise KeyError(slot)
        return v

    def plain(self, slot):
        r = self.rng
        if slot == "DAY":
            return r.choice(DAYS)
        if slot == "MONTH":
            return r.choice(MONTHS)
        if slot == "NUM":
            return str(r.randint(2, 28))
        if slot == "PRICE":
            return "$" + r.choice(["40", "250", "1,200", "3,000", "75", "500", "12,000", "900"])
        if slot == "SCORE":
            return r.choice(["3-1", "2-0", "4-2", "1-0", "5-3"])
        return None


def subject(f, voice):
    """(sentence-initial text, possessive, entity or None)."""
    r = f.rng
    if voice == 1:
        x = r.random()
        if x < 0.5:
            return "I", "my", None
        if x < 0.65:
            return "We", "our", None
        if x < 0.85:
            return r.choice([("My sister", "her"), ("My dad", "his"), ("My mom", "her"), ("My brother", "his"), ("My roommate", "their")]) + (None,)
        name = r.choice([f.c("first_f"), f.c("first_m")])
        return name + " and I", "our", name
    if r.random() < 0.75:
        name, female = f.person()
        return name, "her" if female else "his", name
    return r.choice([("The couple", "their"), ("A local teacher", "her"), ("The family", "their"), ("A retired firefighter", "his")]) + (None,)


def fill(template, f, voice, mode):
    """Renders a template; returns (text, actions, sentence entities)."""
    actions, ents = [], []
    subj = None

    def rep(m):
        nonlocal subj
        key = m.group(1)
        if key in ("S", "POSS"):
            if subj is None:
                subj = subject(f, voice)
                if subj[2]:
                    ents.append(subj[2])
            return subj[0] if key == "S" else subj[1]
        if key.startswith("V:"):
            lemma, _, form = key[2:].partition("|")
            actions.append(lemma)
            past, pp, ing = inflect(lemma)
            form = form or mode
            return {"past": past, "pp": pp, "ing": ing, "base": lemma, "future": "will " + lemma}[form]
        v = f.plain(key)
        if v is not None:
            return v
        v = f.entity(key)
        ents.append(v)
        return v

    # POSS before S is rare; resolve the subject first so the possessive agrees.
    if "{POSS}" in template and "{S}" not in template:
        subj = subject(f, voice)
        if subj[2]:
            ents.append(subj[2])
    text = re.sub(r"\{([^}]+)\}", rep, template)
    if mode == "future" and f.rng.random() < 0.5:
        text = re.sub(r"^(I|We) will ", lambda m: m.group(1) + "'ll ", text)
    return text, actions, ents


def lower_start(text, ents):
    if any(text.startswith(e) for e in ents) or re.match(r"I\b|I'", text):
        return text
    return text[0].lower() + text[1:]


def make_record(rng, split, pools):
    f = Filler(rng, pools[split])
    genre = rng.choices(["news", "diary", "message", "post", "review"], [25, 20, 25, 15, 15])[0]
    topic1 = rng.choice(TOPICS)
    if genre == "review" and topic1 not in REVIEW_TOPICS:
        genre = "message"
    voice = 3 if genre == "news" else 1
    idx = 0 if split == "train" else 1
    n_events = 2 if rng.random() < 0.4 else 1
    topics = [topic1]
    if n_events == 2:
        topics.append(topic1 if rng.random() < 0.3 else rng.choice([t for t in TOPICS if t != topic1]))
    events, used = [], set()
    for t in topics:
        pool = [x for x in EVENTS[t][idx] if (voice == 1 or not x.startswith("1:")) and x not in used]
        tpl = rng.choice(pool)
        used.add(tpl)
        mode = "past" if rng.random() < 0.7 else "future"
        text, acts, ents = fill(tpl[2:] if tpl.startswith("1:") else tpl, f, voice, mode)
        events.append({"text": text, "actions": acts, "ents": ents, "prefix": None})
    # Emotions.
    # Texts without emotion cues: 40 % (first person) / 60 % (news) in training, 30 % / 50 % held out.
    weights = {("train", 1): [40, 45, 15], ("train", 3): [60, 37, 3], ("heldout", 1): [30, 50, 20], ("heldout", 3): [50, 45, 5]}
    k = rng.choices([0, 1, 2], weights[split, voice])[0]
    emotions = rng.sample(EMOTIONS, k)
    emo_sentences = []
    emoji = []
    for e in emotions:
        first, third, adverbs = EMOTION_TEXT[e][idx]
        free = [ev for ev in events if ev["prefix"] is None]
        if free and rng.random() < 0.25:
            rng.choice(free)["prefix"] = rng.choice(adverbs)
            continue
        s = rng.choice(first if voice == 1 else third)
        ents = []
        if "{PERSON}" in s:
            name = f.person()[0]
            s = s.replace("{PERSON}", name)
            ents.append(name)
        emo_sentences.append((s, ents))
        if genre == "post" and rng.random() < 0.5:
            emoji.append(EMOJI[e])
    # Assemble: events in order, emotion sentences after (or now and then before) them.
    parts = []  # (sentence, entities)
    if emo_sentences and rng.random() < 0.15:
        parts.append(emo_sentences.pop(0))
    for i, ev in enumerate(events):
        s = ev["text"]
        if ev["prefix"]:
            s = ev["prefix"] + ", " + lower_start(s, ev["ents"])
        if i == 1:
            conn = rng.choice(CONNECTIVES[split])
            if conn and not ev["prefix"]:
                s = conn + lower_start(s, ev["ents"])
        parts.append((s, ev["ents"]))
        if emo_sentences and (i == len(events) - 1 or rng.random() < 0.5):
            parts.append(emo_sentences.pop(0))
    parts.extend(emo_sentences)
    if rng.random() < 0.25:
        parts.insert(rng.randint(1, len(parts)), (rng.choice(FILLERS[split]), []))
    openers, closers = GENRE[split][genre]
    opener_t, closer_t = rng.choice(openers), rng.choice(closers)
    extra = []

    def wrap(t):
        def rep(m):
            key = m.group(1)
            if key == "STARS":
                return rng.choice(["5", "4", "3", "2"]) if split == "heldout" else rng.choice(["Five", "Four", "Three", "Two"])
            v = f.plain(key)
            if v is not None:
                return v
            v = f.entity(key)
            extra.append(v)
            return v
        return re.sub(r"\{([^}]+)\}", rep, t)

    opener, closer = wrap(opener_t), wrap(closer_t)
    body = " ".join(p[0] for p in parts)
    if emoji:
        body += " " + "".join(emoji)
    if opener.endswith((", ", "- ")) and not opener.startswith(tuple(pools[split]["city"])) or (genre == "message" and rng.random() < 0.15):
        body = lower_start(body, parts[0][1])  # casual: no capital (never on a name or "I")
    text = opener + body + closer
    # Labels.
    all_ents = [e for p in parts for e in p[1]] + extra
    positions = []
    for e in dict.fromkeys(all_ents):
        pos = text.find(e)
        assert pos >= 0, (e, text)
        positions.append((pos, e))
    entities = [e for _, e in sorted(positions)]
    actions = list(dict.fromkeys(a for ev in events for a in ev["actions"]))
    emotions_in_order = emotions  # order as chosen; gold is a set
    labels = {"topics": list(dict.fromkeys(topics)), "emotions": emotions_in_order, "actions": actions, "entities": entities}
    if len(entities) > 5 or len(actions) > 4:
        return None
    return {"text": text, "genre": genre, **labels}


def generate(split, n, seed, pools):
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < n:
        rec = make_record(rng, split, pools)
        if rec is None or rec["text"] in seen:
            continue
        seen.add(rec["text"])
        rec = {"id": f"{split}-{len(out):04d}", **rec}
        out.append(rec)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--heldout", type=int, default=200)
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    pools = make_pools()
    # Sanity: the splits' pools are disjoint.
    for k in ("first_m", "first_f", "last", "city", "country", "brand", "mascot", "adj", "noun", "plural", "model", "carmodel", "party"):
        assert not set(pools["train"][k]) & set(pools["heldout"][k]), k
    train = generate("train", a.train, SEED, pools)
    held = generate("heldout", a.heldout, SEED + 1, pools)
    tt = {r["text"] for r in train}
    assert not any(r["text"] in tt for r in held)
    for name, recs in (("train.jsonl", train), ("heldout.jsonl", held)):
        with open(f"{a.out}/{name}", "w") as fh:
            for r in recs:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(train)} train and {len(held)} held-out records", file=sys.stderr)


if __name__ == "__main__":
    main()
