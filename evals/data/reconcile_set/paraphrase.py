"""Paraphrase: the turns restate something already remembered in other words, so the careful
answer is NOOP on that memory. Each family is its own situation, domain and way of talking."""

from __future__ import annotations

from datetime import date

from evals.data.reconcile_set.kit import CITIES, EMPLOYERS, INSTRUMENTS, case, day, fact, filler

FRIENDS = ["Tomás", "Wen", "Adebayo", "Siobhan", "Raj", "Mei", "Kwame", "Lucía", "Yusuf", "Anneke"]
LANGUAGES = [
    ("Spanish", "Claro que sí, hablo español sin problema — it's what we spoke at home."),
    ("French", "Bien sûr, je parle français couramment, my whole school was in French."),
    ("Portuguese", "Falo português fluentemente, I grew up between Porto and Braga."),
    ("German", "Ja, ich spreche fließend Deutsch — six years in Hamburg will do that."),
]
BANDS = ["Radiohead", "Fleetwood Mac", "Bad Bunny", "Khruangbin", "ABBA", "Arctic Monkeys"]
JOBS = [
    ("software engineer", "I write code for a living", "{p} writes software professionally."),
    ("primary school teacher", "I spend my days teaching seven-year-olds", "{p} teaches young children."),
    ("accountant", "I do people's books and tax returns all day", "{p} works in accounting."),
    ("nurse", "twelve-hour shifts on the ward again, that's nursing for you", "{p} works as a nurse."),
]
HOLIDAYS = [
    ("Diwali", "lamps, sweets and far too many cousins"),
    ("Eid al-Fitr", "the big family lunch after prayers"),
    ("Hanukkah", "latkes every night and the menorah in the window"),
    ("Lunar New Year", "dumplings, red envelopes, the whole thing"),
]
CARS = [("Volvo", "V70"), ("Honda", "Civic"), ("Subaru", "Outback"), ("Fiat", "Panda")]
BIRTHDAYS = [("March 14", "3/14"), ("July 4", "7/4"), ("October 31", "10/31"), ("February 2", "2/2")]
TEAMS = ["Boca Juniors", "the Chicago Cubs", "Celtic", "the Toronto Raptors", "Benfica"]
HERBS = [("coriander", "cilantro"), ("aubergine", "eggplant"), ("courgette", "zucchini")]


def _since(rng):
    return day(rng, date(2022, 6, 1), 450)


def home_city_reworded(rng, p, when):
    city = rng.choice(CITIES)
    old = fact(f"{p} lives in {city}.", p, "lives_in", city, day(rng, date(2023, 1, 1)), "profile")
    existing = [*filler(rng, p, rng.randrange(2), {city}), old]
    rng.shuffle(existing)
    phrasing = rng.choice(
        [f"My home is in {city}.", f"I'm based in {city}, as you know.", f"Yes, {city} is where I live."]
    )
    new = [fact(f"{p}'s home is in {city}.", p, "lives_in", city, when, "profile")]
    return case(
        "paraphrase",
        p,
        when,
        [phrasing],
        existing,
        new,
        [{"action": "NOOP", "target": existing.index(old) + 1}],
    )


def peanut_allergy_in_passing(rng, p, when):
    nut = rng.choice(["peanuts", "cashews", "walnuts"])
    old = fact(f"{p} is allergic to {nut}.", p, "allergic_to", nut, _since(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), {nut})]
    rng.shuffle(existing)
    turn = f"just fyi, {nut} and me don't mix — one bite and my throat swells up"
    new = [fact(f"{p} has an allergy to {nut}.", p, "allergic_to", nut, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def employer_grumble(rng, p, when):
    employer = rng.choice(EMPLOYERS)
    old = fact(f"{p} works at {employer}.", p, "works_at", employer, _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), {employer}), old]
    rng.shuffle(existing)
    turns = [
        "Ugh, Monday.",
        f"Another week of spreadsheets at {employer} — they're still the ones paying me.",
    ]
    new = [fact(f"{p} is employed by {employer}.", p, "works_at", employer, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, turns, existing, new, ops)


def vegetarian_stated_formally(rng, p, when):
    old = fact(f"{p} is a vegetarian.", p, "diet", "vegetarian", _since(rng), "profile")
    host = rng.choice(FRIENDS)
    existing = [
        old,
        fact(f"{host} is hosting a barbecue in June.", host, "hosts", None, _since(rng), "event"),
    ]
    rng.shuffle(existing)
    turn = (
        "For the avoidance of doubt: I do not consume meat or fish, and have not done so for many years. "
        "Kindly keep that in mind when suggesting recipes."
    )
    new = [fact(f"{p} does not eat meat or fish.", p, "diet", "vegetarian", when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def dog_named_while_complaining(rng, p, when):
    name = rng.choice(["Pixel", "Biscuit", "Toffee", "Rocket", "Nala"])
    old = fact(f"{p} has a dog named {name}.", p, "has_pet", name, _since(rng), "profile")
    existing = [*filler(rng, p, 2, {name}), old]
    rng.shuffle(existing)
    turn = f"lol {name} (my dog, for the new folks) chewed through my charger AGAIN 🙄"
    new = [fact(f"{p}'s dog is called {name}.", p, "has_pet", name, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def brothers_in_a_ramble(rng, p, when):
    b1, b2 = rng.sample(["Marco", "Jun", "Idris", "Pavel", "Sean", "Tariq"], 2)
    old = fact(f"{p} has two brothers, {b1} and {b2}.", p, "brothers", f"{b1}, {b2}", _since(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), {b1, b2})]
    rng.shuffle(existing)
    turn = (
        f"So Mum rang, and of course the first thing she asks is whether I've called the boys — "
        f"{b1} and {b2}, I mean, it's only ever been the two of them — and I said not since Easter, "
        "and then we got onto the garden, you know how it goes."
    )
    new = [fact(f"{p}'s only brothers are {b1} and {b2}.", p, "brothers", f"{b1}, {b2}", when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def fluent_language_in_that_language(rng, p, when):
    language, turn = rng.choice(LANGUAGES)
    old = fact(f"{p} speaks {language} fluently.", p, "speaks", language, _since(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), {language})]
    rng.shuffle(existing)
    new = [fact(f"{p} is fluent in {language}.", p, "speaks", language, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def gym_days_terse(rng, p, when):
    first, second = rng.choice([("Monday", "Thursday"), ("Tuesday", "Friday"), ("Wednesday", "Sunday")])
    old = fact(f"{p} goes to the gym on {first}s and {second}s.", p, "gym_days", None, _since(rng))
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"gym: {first[:3].lower()} + {second[:3].lower()}. as always."
    new = [fact(f"{p} works out at the gym every {first} and {second}.", p, "gym_days", None, when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def birthday_in_digits(rng, p, when):
    spelled, digits = rng.choice(BIRTHDAYS)
    old = fact(f"{p}'s birthday is on {spelled}.", p, "birthday", spelled, _since(rng), "profile")
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"Don't let anyone forget: {digits} is my bday, same as every year!"
    new = [fact(f"{p} was born on {spelled}.", p, "birthday", spelled, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def band_still_adored(rng, p, when):
    band = rng.choice(BANDS)
    old = fact(f"{p} is a big fan of {band}.", p, "likes", band, _since(rng), "preference")
    existing = [*filler(rng, p, 1 + rng.randrange(2), {band}), old]
    rng.shuffle(existing)
    turn = f"Honestly nobody beats {band}. They're on repeat in my headphones basically every day."
    new = [fact(f"{p} loves the music of {band}.", p, "likes", band, when, "preference")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def cycling_commute_non_native(rng, p, when):
    old = fact(f"{p} cycles to work.", p, "commutes_by", "bicycle", _since(rng))
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = "Every day I am going to my work with the bicycle, also when it is raining, this I like."
    new = [fact(f"{p} commutes to the office by bike.", p, "commutes_by", "bicycle", when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def spouse_cooking_night(rng, p, when):
    spouse, word = rng.choice(
        [("Daniel", "husband"), ("Amara", "wife"), ("Luca", "husband"), ("Yara", "wife")]
    )
    old = fact(f"{p} is married to {spouse}.", p, "married_to", spouse, _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(2), {spouse}), old]
    rng.shuffle(existing)
    turns = ["Cooking night tonight.", f"My {word} {spouse} does the sauce, I'm just on chopping duty."]
    new = [fact(f"{p}'s {word} is {spouse}.", p, "married_to", spouse, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, turns, existing, new, ops)


def job_described_not_named(rng, p, when):
    title, said, content = rng.choice(JOBS)
    old = fact(f"{p} is a {title}.", p, "job_title", title, _since(rng), "profile")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"Nothing's changed on the work front — {said}."
    new = [fact(content.format(p=p), p, "job_title", title, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def three_kids_chaos(rng, p, when):
    count, word = rng.choice([(3, "three"), (4, "four"), (2, "two")])
    old = fact(f"{p} has {word} children.", p, "children", str(count), _since(rng), "profile")
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = f"With {word} kids in the house it is NEVER quiet, not even at 6 am."
    new = [fact(f"{p} is a parent of {word}.", p, "children", str(count), when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def coffee_order_repeated(rng, p, when):
    old = fact(
        f"{p} takes coffee black, without sugar.", p, "coffee_order", "black", _since(rng), "preference"
    )
    tea = fact(
        f"{p} drinks chamomile tea before bed.", p, "drinks", "chamomile tea", _since(rng), "preference"
    )
    existing = [old, tea]
    rng.shuffle(existing)
    turns = ["The new barista asked for my usual.", "Black, no sugar, nothing fancy. Same as ever."]
    new = [fact(f"{p} drinks coffee black and unsweetened.", p, "coffee_order", "black", when, "preference")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, turns, existing, new, ops)


def herb_by_its_other_name(rng, p, when):
    british, american = rng.choice(HERBS)
    old = fact(f"{p} dislikes {british}.", p, "dislikes", british, _since(rng), "preference")
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"Whatever you do, keep {american} off my plate. Can't stand the stuff."
    new = [fact(f"{p} hates {american}.", p, "dislikes", american, when, "preference")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def holiday_tradition_again(rng, p, when):
    holiday, detail = rng.choice(HOLIDAYS)
    old = fact(f"{p} celebrates {holiday} with family every year.", p, "celebrates", holiday, _since(rng))
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = f"{holiday} at my parents' place again this year, like always — {detail}."
    new = [fact(f"{p} spends {holiday} with family each year.", p, "celebrates", holiday, when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def saturday_volunteering(rng, p, when):
    place = rng.choice(["food bank", "animal shelter", "community garden", "soup kitchen"])
    old = fact(f"{p} volunteers at the {place} every Saturday.", p, "volunteers_at", place, _since(rng))
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = f"Saturday mornings belong to the {place}. I'm down there helping out every single week."
    new = [fact(f"{p} helps out at the {place} weekly, on Saturdays.", p, "volunteers_at", place, when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def old_car_still_running(rng, p, when):
    make, model = rng.choice(CARS)
    year = rng.choice([2008, 2011, 2013, 2015])
    old = fact(f"{p} drives a {year} {make} {model}.", p, "car", f"{make} {model}", _since(rng), "profile")
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = f"The old {model} — {year} model, {make} built them to last — still starts first time, every time."
    new = [fact(f"{p}'s car is a {make} {model} from {year}.", p, "car", f"{make} {model}", when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def phone_number_other_format(rng, p, when):
    area, mid, end = rng.choice(["617", "312", "415"]), rng.randrange(200, 999), rng.randrange(1000, 9999)
    spaced, dashed = f"+1 {area} {mid} {end}", f"({area}) {mid}-{end}"
    old = fact(f"{p}'s phone number is {spaced}.", p, "phone", spaced, _since(rng), "profile")
    friend = rng.choice(FRIENDS)
    other = f"+1 {area} {rng.randrange(200, 999)} {rng.randrange(1000, 9999)}"
    existing = [
        old,
        fact(f"{friend}'s phone number is {other}.", friend, "phone", other, _since(rng), "profile"),
    ]
    rng.shuffle(existing)
    turn = f"Yep, same number as always if anyone asks: {dashed}."
    new = [fact(f"{p} can be reached by phone at {dashed}.", p, "phone", dashed, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def thesis_season_student(rng, p, when):
    field, uni = rng.choice([("economics", "LSE"), ("marine biology", "UCSD"), ("linguistics", "Leiden")])
    old = fact(f"{p} is studying for a master's in {field} at {uni}.", p, "studies", field, _since(rng))
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"thesis season for my {field} MSc at {uni} 😩 send snacks"
    new = [fact(f"{p} is a {field} master's student at {uni}.", p, "studies", field, when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def early_riser_half_five(rng, p, when):
    old = fact(f"{p} usually wakes up at 5:30 am.", p, "wakes_up_at", "05:30", _since(rng))
    existing = [*filler(rng, p, 2, set()), old]
    rng.shuffle(existing)
    turn = "I'm always up before six — half five, give or take, no alarm needed."
    new = [
        fact(
            f"{p} normally gets out of bed at half past five in the morning.", p, "wakes_up_at", "05:30", when
        )
    ]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def lactose_intolerance_german(rng, p, when):
    old = fact(
        f"{p} is lactose intolerant.", p, "health_condition", "lactose intolerance", _since(rng), "profile"
    )
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = "Milch vertrage ich nicht — dairy has always wrecked my stomach, so oat milk for me."
    new = [fact(f"{p} cannot digest milk products.", p, "health_condition", "lactose intolerance", when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def cat_and_city_both_known(rng, p, when):
    city, cat = rng.choice(CITIES), rng.choice(["Miso", "Pudding", "Sardine", "Oreo"])
    home = fact(f"{p} lives in {city}.", p, "lives_in", city, _since(rng), "profile")
    pet = fact(f"{p} has a cat named {cat}.", p, "has_pet", cat, _since(rng), "profile")
    existing = [home, pet, *filler(rng, p, rng.randrange(2), {city})]
    rng.shuffle(existing)
    turn = f"Still here in {city}, with {cat} — my cat — asleep on the keyboard as usual."
    new = [
        fact(f"{p} is based in {city}.", p, "lives_in", city, when, "profile"),
        fact(f"{p}'s cat is called {cat}.", p, "has_pet", cat, when, "profile"),
    ]
    ops = [
        {"action": "NOOP", "target": existing.index(home) + 1},
        {"action": "NOOP", "target": existing.index(pet) + 1},
    ]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def marathons_like_a_friend(rng, p, when):
    friend = rng.choice(FRIENDS)
    theirs = fact(f"{friend} runs marathons.", friend, "sport", "marathon", _since(rng))
    mine = fact(f"{p} runs marathons.", p, "sport", "marathon", _since(rng))
    existing = [theirs, mine, *filler(rng, p, rng.randrange(2), set())]
    rng.shuffle(existing)
    turn = f"{friend} dragged me into marathon running years ago, and I'm still lining up for the full 42 km."
    new = [fact(f"{p} competes in full-distance marathon races.", p, "sport", "marathon", when)]
    ops = [{"action": "NOOP", "target": existing.index(mine) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def instrument_since_childhood(rng, p, when):
    instrument = rng.choice(INSTRUMENTS)
    old = fact(f"{p} has played the {instrument} since childhood.", p, "plays", instrument, _since(rng))
    existing = [old, *filler(rng, p, 2, {"plays"})]
    rng.shuffle(existing)
    turn = f"First {instrument} lesson at six years old, and I never put it down since."
    new = [fact(f"{p} has been playing the {instrument} from a young age.", p, "plays", instrument, when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def fully_remote_joke(rng, p, when):
    old = fact(f"{p} works from home full-time.", p, "work_arrangement", "remote", _since(rng))
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turn = "My commute is bedroom to kitchen table. No office, never go in, fully remote."
    new = [fact(f"{p} works remotely and never goes into an office.", p, "work_arrangement", "remote", when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def deposit_savings(rng, p, when):
    currency = rng.choice(["euro", "pound", "dollar"])
    old = fact(f"{p} is saving up for a house deposit.", p, "saving_for", "house deposit", _since(rng))
    existing = [old, *filler(rng, p, rng.randrange(3), set())]
    rng.shuffle(existing)
    turn = f"Every spare {currency} still goes into the fund for a down payment on our first home."
    new = [
        fact(
            f"{p} is putting money aside for a down payment on a home.",
            p,
            "saving_for",
            "house deposit",
            when,
        )
    ]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def linux_over_windows(rng, p, when):
    old = fact(f"{p} prefers Linux over Windows.", p, "prefers", "Linux", _since(rng), "preference")
    laptop = fact(f"{p} owns a ThinkPad laptop.", p, "owns", "ThinkPad", _since(rng))
    existing = [old, laptop]
    rng.shuffle(existing)
    turn = "Windows? No thanks. Everything I own runs Linux and that's how it stays."
    new = [fact(f"{p} would rather use Linux than Windows.", p, "prefers", "Linux", when, "preference")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def birthplace_hindi(rng, p, when):
    city = rng.choice(["Mumbai", "Jaipur", "Lucknow", "Pune"])
    old = fact(f"{p} was born in {city}.", p, "born_in", city, _since(rng), "profile")
    existing = [*filler(rng, p, 2, {city}), old]
    rng.shuffle(existing)
    turn = f"Mera janm {city} mein hua tha — born there, raised there, {city} is in my blood."
    new = [fact(f"{p}'s birthplace is {city}.", p, "born_in", city, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def lifelong_supporter(rng, p, when):
    team = rng.choice(TEAMS)
    old = fact(f"{p} supports {team}.", p, "supports", team, _since(rng), "preference")
    existing = [old, *filler(rng, p, 1 + rng.randrange(2), set())]
    rng.shuffle(existing)
    turns = ["Rough result on Sunday.", f"Doesn't matter. Born backing {team}, I'll die backing {team}."]
    new = [fact(f"{p} is a lifelong {team} fan.", p, "supports", team, when, "preference")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, turns, existing, new, ops)


def window_seat_flyer(rng, p, when):
    old = fact(
        f"{p} prefers window seats on flights.", p, "seat_preference", "window", _since(rng), "preference"
    )
    existing = [*filler(rng, p, rng.randrange(3), set()), old]
    rng.shuffle(existing)
    turn = "aisle?? never. when I fly it's the window or I'm not getting on"
    new = [fact(f"{p} always picks a seat by the window when flying.", p, "seat_preference", "window", when)]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def thyroid_pill_routine(rng, p, when):
    old = fact(f"{p} takes levothyroxine every morning.", p, "takes_medication", "levothyroxine", _since(rng))
    existing = [old, *filler(rng, p, 2, set())]
    rng.shuffle(existing)
    turn = "Thyroid tablet first thing, on an empty stomach, before coffee. Every day, same routine."
    new = [
        fact(f"{p} has a daily morning dose of levothyroxine.", p, "takes_medication", "levothyroxine", when)
    ]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, [turn], existing, new, ops)


def flat_confirmed_on_question(rng, p, when):
    street = rng.choice(["Rua das Flores", "Calle Mayor", "Elm Street", "Rue Oberkampf"])
    old = fact(f"{p}'s flat is on {street}.", p, "home", street, _since(rng), "profile")
    existing = [*filler(rng, p, 1 + rng.randrange(2), set()), old]
    rng.shuffle(existing)
    turns = ["You asked whether I'd moved.", f"Nope — the place on {street} is still home."]
    new = [fact(f"{p} still lives in the flat on {street}.", p, "home", street, when, "profile")]
    ops = [{"action": "NOOP", "target": existing.index(old) + 1}]
    return case("paraphrase", p, when, turns, existing, new, ops)


TEMPLATES = [
    home_city_reworded,
    peanut_allergy_in_passing,
    employer_grumble,
    vegetarian_stated_formally,
    dog_named_while_complaining,
    brothers_in_a_ramble,
    fluent_language_in_that_language,
    gym_days_terse,
    birthday_in_digits,
    band_still_adored,
    cycling_commute_non_native,
    spouse_cooking_night,
    job_described_not_named,
    three_kids_chaos,
    coffee_order_repeated,
    herb_by_its_other_name,
    holiday_tradition_again,
    saturday_volunteering,
    old_car_still_running,
    phone_number_other_format,
    thesis_season_student,
    early_riser_half_five,
    lactose_intolerance_german,
    cat_and_city_both_known,
    marathons_like_a_friend,
    instrument_since_childhood,
    fully_remote_joke,
    deposit_savings,
    linux_over_windows,
    birthplace_hindi,
    lifelong_supporter,
    window_seat_flyer,
    thyroid_pill_routine,
    flat_confirmed_on_question,
]
