"""Same predicate, other person: the turns give the speaker's own fact in a slot where memory
already holds SOMEONE ELSE's fact (a friend's city, a partner's employer, a sibling's diet).
Different people never conflict, so the careful answer is ADD, never touching the other
person's memory. Each family is one row with its own relation, domain and wording."""

from __future__ import annotations

from datetime import date

from evals.data.reconcile_set.kit import CITIES, EMPLOYERS, PEOPLE, case, day, fact, filler

# name, predicate, kind, the other person's memory, the turns, the speaker's new fact, options.
# {p} the speaker, {q} the other person, {a} their value, {b} the speaker's value.
ROWS = [
    (
        "friend_city_and_mine",
        "lives_in",
        "profile",
        "{q} lives in {a}.",
        ["My friend {q} lives in {a}; I live in {b} myself."],
        "{p} lives in {b}.",
        CITIES,
    ),
    (
        "partner_employer",
        "works_at",
        "profile",
        "{q} works at {a}.",
        ["{q} is still at {a}, but I just started at {b}."],
        "{p} works at {b}.",
        EMPLOYERS,
    ),
    (
        "sister_vegan_me_pescatarian",
        "diet",
        "profile",
        "{q} is {a}.",
        ["Unlike {q}, who went {a}, I'm {b} — fish yes, meat no."],
        "{p} is {b}.",
        ["vegan", "vegetarian", "pescatarian", "keto"],
    ),
    (
        "flatmate_car",
        "car",
        "profile",
        "{q} drives a {a}.",
        ["{q} has the {a} but I bike mostly; I do own a {b} for trips though."],
        "{p} owns a {b}.",
        ["Skoda Octavia", "Nissan Leaf", "Mini Cooper", "Kia Picanto"],
    ),
    (
        "coworker_job_title",
        "job_title",
        "profile",
        "{q} is a {a}.",
        ["People mix us up at work: {q} is the {a}, I'm the {b}."],
        "{p} is a {b}.",
        ["product manager", "data analyst", "UX designer", "QA engineer"],
    ),
    (
        "brother_married_to",
        "married_to",
        "profile",
        "{q} is married to {a}.",
        ["My brother {q} married {a} years ago; I married {b} this spring!"],
        "{p} is married to {b}.",
        ["Sam", "Noemi", "Tariq", "Helga", "Ravi"],
    ),
    (
        "mother_phone_number",
        "phone",
        "profile",
        "{q}'s phone number is {a}.",
        ["that number you have is my mum {q}'s. mine is {b}"],
        "{p}'s phone number is {b}.",
        ["555-0101", "555-0147", "555-0193", "555-0168"],
    ),
    (
        "teammate_position",
        "plays_position",
        "fact",
        "{q} plays {a} on the team.",
        ["Coach moved me: {q} keeps {a}, and I'm playing {b} from now on."],
        "{p} plays {b} on the team.",
        ["goalkeeper", "left back", "striker", "midfield"],
    ),
    (
        "cousin_studies",
        "studies",
        "fact",
        "{q} studies {a}.",
        ["Mi prima {q} estudia {a}, y yo — I'm doing {b} at night school."],
        "{p} studies {b}.",
        ["law", "nursing", "engineering", "graphic design"],
    ),
    (
        "neighbour_dog_name",
        "has_pet",
        "profile",
        "{q} has a dog named {a}.",
        ["{q}'s dog {a} barks at everyone; my own dog {b} is a saint."],
        "{p} has a dog named {b}.",
        ["Rex", "Luna", "Pepper", "Bruno"],
    ),
    (
        "boss_favourite_food",
        "favourite_food",
        "preference",
        "{q}'s favourite food is {a}.",
        ["Team lunch debate: {q} votes {a} as always, I'll always pick {b}."],
        "{p}'s favourite food is {b}.",
        ["sushi", "tacos", "biryani", "ramen", "pizza"],
    ),
    (
        "twin_birthday_differs",
        "birthday",
        "profile",
        "{q}'s birthday is on {a}.",
        ["Yes we're twins but born either side of midnight: {q} on {a}, me on {b}."],
        "{p}'s birthday is on {b}.",
        ["April 30", "May 1"],
    ),
    (
        "friend_email",
        "email",
        "profile",
        "{q}'s email is {a}.",
        ["Please send the invite to me directly, {b}, not via {q} ({a})."],
        "{p}'s email is {b}.",
        ["kim.h@example.org", "j.ortiz@example.net", "mdlr@example.com"],
    ),
    (
        "dad_retired_me_working",
        "status",
        "profile",
        "{q} is {a}.",
        ["Dad ({q}) is happily {a} now; me, I'm {b} and job hunting."],
        "{p} is {b}.",
        ["retired", "unemployed", "on parental leave", "self-employed"],
    ),
    (
        "roommate_gym",
        "member_of",
        "fact",
        "{q} is a member of {a}.",
        ["{q} goes to {a} but it's too pricey; I joined {b} instead."],
        "{p} is a member of {b}.",
        ["FitLife gym", "the climbing wall", "the YMCA", "CrossFit North"],
    ),
    (
        "colleague_language",
        "speaks",
        "fact",
        "{q} speaks {a}.",
        ["For the Tokyo client {q} handles the {a}, I can cover {b}."],
        "{p} speaks {b}.",
        ["Japanese", "Korean", "Mandarin", "Cantonese"],
    ),
    (
        "aunt_hometown_german",
        "born_in",
        "profile",
        "{q} was born in {a}.",
        ["Tante {q} ist aus {a}, aber ich bin in {b} geboren, wirklich."],
        "{p} was born in {b}.",
        ["Munich", "Leipzig", "Graz", "Zurich"],
    ),
    (
        "son_school_grade",
        "school_year",
        "fact",
        "{q} is in {a}.",
        ["My older kid {q} is in {a}; as for me, I'm in {b} of my evening degree."],
        "{p} is in {b} of an evening degree.",
        ["year 7", "year 2", "year 3"],
    ),
    (
        "friend_instrument_band",
        "plays",
        "fact",
        "{q} plays the {a}.",
        ["In our band {q} is on {a} — I play the {b}."],
        "{p} plays the {b}.",
        ["drums", "bass", "saxophone", "keyboard"],
    ),
    (
        "spouse_shift",
        "works_shift",
        "fact",
        "{q} works the {a} shift.",
        ["{q} is on {a} shifts at the hospital; I'm on {b} at the depot."],
        "{p} works the {b} shift.",
        ["night", "early", "late", "weekend"],
    ),
    (
        "grandpa_allergy",
        "allergic_to",
        "profile",
        "{q} is allergic to {a}.",
        ["Grandpa {q} can't have {a}, and — plot twist — I just found out I'm allergic to {b}."],
        "{p} is allergic to {b}.",
        ["penicillin", "peanuts", "latex", "bee stings"],
    ),
    (
        "classmate_thesis_topic",
        "researches",
        "fact",
        "{q} researches {a}.",
        ["Don't confuse our theses: {q} does {a}, my topic is {b}."],
        "{p} researches {b}.",
        ["coral reefs", "soil bacteria", "medieval trade", "battery chemistry"],
    ),
    (
        "friend_team_support",
        "supports",
        "preference",
        "{q} supports {a}.",
        ["{q} bleeds {a} colours, I'm a lifelong {b} fan, so derby day is tense."],
        "{p} supports {b}.",
        ["Arsenal", "Porto", "Flamengo", "Ajax"],
    ),
    (
        "sibling_address",
        "address",
        "profile",
        "{q} lives at {a}.",
        ["Parcel went to {q}'s place at {a} by mistake, my address is {b}."],
        "{p} lives at {b}.",
        ["12 Elm Road", "4 Harbour Lane", "88 Mill Street", "7 Quarry Close"],
    ),
    (
        "mentor_age",
        "age",
        "profile",
        "{q} is {a} years old.",
        ["{q} is {a}, and I turned {b} last week, so we're a generation apart."],
        "{p} is {b} years old.",
        ["61", "58", "27", "24"],
    ),
    (
        "wife_hobby_hindi",
        "likes",
        "preference",
        "{q} likes {a}.",
        ["Meri wife {q} ko {a} pasand hai, mujhe {b} — so weekends are split."],
        "{p} likes {b}.",
        ["gardening", "cricket", "painting", "trekking"],
    ),
    (
        "friend_phone_model",
        "uses_phone",
        "fact",
        "{q} uses a {a}.",
        ["{q} swears by the {a}; I switched to a {b} last month."],
        "{p} uses a {b}.",
        ["Pixel 8", "iPhone 15", "Fairphone 5", "Galaxy S23"],
    ),
    (
        "colleague_desk",
        "sits_at",
        "fact",
        "{q} sits at desk {a}.",
        ["hot-desking update: {q} took {a}, I'm at {b} by the window"],
        "{p} sits at desk {b}.",
        ["4B", "12A", "7C", "9D"],
    ),
    (
        "niece_nickname",
        "nickname",
        "profile",
        "{q}'s nickname is {a}.",
        ["Everyone calls my niece {q} '{a}', but my own nickname is '{b}', fyi."],
        "{p}'s nickname is {b}.",
        ["Bean", "Sparky", "Tiny", "Doc"],
    ),
    (
        "roommate_bank",
        "banks_with",
        "fact",
        "{q} banks with {a}.",
        ["Splitting rent is annoying because {q} is with {a} and I'm with {b}."],
        "{p} banks with {b}.",
        ["Monzo", "N26", "Revolut", "Nubank"],
    ),
    (
        "friend_doctor",
        "doctor",
        "fact",
        "{q}'s doctor is {a}.",
        ["{q} recommended {a}, but my GP is {b} and I'm staying with her."],
        "{p}'s doctor is {b}.",
        ["Dr. Okafor", "Dr. Lindqvist", "Dr. Mehta", "Dr. Alvarez"],
    ),
]


def _template(row):
    name, predicate, kind, theirs_text, turns, mine_text, options = row

    def template(rng, p, when):
        q = rng.choice([person for person in PEOPLE if person != p])
        a, b = rng.sample(options, 2)
        theirs = fact(theirs_text.format(q=q, a=a), q, predicate, a, day(rng, date(2023, 1, 1)), kind)
        existing = [theirs, *filler(rng, p, rng.randrange(3), {a, b})]
        rng.shuffle(existing)
        new = [fact(mine_text.format(p=p, b=b), p, predicate, b, when, kind)]
        said = [turn.format(p=p, q=q, a=a, b=b) for turn in turns]
        return case("same_predicate_other_person", p, when, said, existing, new, [{"action": "ADD"}])

    template.__name__ = name
    return template


TEMPLATES = [_template(row) for row in ROWS]
