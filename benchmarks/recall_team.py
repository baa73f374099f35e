"""The team set of `benchmarks/recall.py`: what six agents building an invoicing product
said in one channel — claims, questions and the answers that settled them, notes — and
searches an agent types, each with graded labels. Written before any ranking change was
tuned on it; the searches with ``held`` set were never looked at while tuning.

The searches exercise what issue 42 names: abbreviations (``k8s``, ``pg``, ``prod``),
typos, split and joined compounds ("roll back" / "rollback", "log in" / "login"),
camelCase typed in lower case, questions whose answer lies in another agent's answer
(the question itself matches the search better than the answer does), and entities
(an incident named in one sentence and explained in another).

Records: ``(key, agent, kind, content)``; ``kind`` is ``claim`` (a sentence), ``ask``
(a free-text question), ``answer`` (``content`` is ``(question key, answer content)``)
or ``note`` (a claim whose sentence is a free-text note). A label names the key of the
record that answers the search — for an answer, the answer (its move and the claim it
carries count as the same record). Grade 2: it answers the search; grade 1: it helps.
"""

AGENTS = (
    "AgentAtlas",
    "AgentBoreas",
    "AgentCyra",
    "AgentDune",
    "AgentEos",
    "AgentFaro",
)

RECORDS = [
    # --- infrastructure
    ("k8s", "AgentAtlas", "claim", '(kubernetesVersion ProdCluster "1.29")'),
    ("k8sns", "AgentAtlas", "claim", "(k8sNamespace InvoiceApi Billing)"),
    ("s3", "AgentAtlas", "claim", '(s3Bucket InvoicePdfs "acme-invoices-prod")'),
    ("ec2", "AgentBoreas", "claim", "(ec2InstanceType PdfRenderer C6gLarge)"),
    ("pg", "AgentBoreas", "claim", "(postgresMajorVersion ProdCluster 16)"),
    ("pgpool", "AgentBoreas", "claim", "(maxConnections InvoiceDb 200)"),
    ("redis", "AgentAtlas", "claim", "(cacheBackend InvoiceApi Redis7)"),
    ("queue", "AgentCyra", "claim", "(messageBroker InvoiceEvents RabbitMq)"),
    ("cdn", "AgentAtlas", "claim", "(servesStaticAssets Cloudfront CustomerPortal)"),
    ("dns", "AgentAtlas", "claim", "(dnsProvider AcmeDomain Route53)"),
    ("tls", "AgentBoreas", "claim", '(certificateExpires ApiGateway "2027-01-15")'),
    ("grpc", "AgentCyra", "claim", "(rpcProtocol LedgerService Grpc)"),
    ("oauth", "AgentCyra", "claim", "(authMethod PublicApi OAuth2)"),
    ("ratelimit", "AgentCyra", "claim", "(rateLimitPerMinute PublicApi 600)"),
    ("cron", "AgentDune", "claim", '(cronSchedule DunningJob "0 6 * * *")'),
    # --- releases
    ("friday", "AgentEos", "claim", '(convention Team "no deploys to prod after Friday 15:00")'),
    ("freeze", "AgentEos", "claim", '(deployFreezeStarts Ops "2026-12-18 18:00 UTC")'),
    (
        "rollback",
        "AgentEos",
        "claim",
        '(rollbackPlanFor InvoiceRelease "redeploy 4.1.3 and restore the invoices table '
        'from the nightly snapshot")',
    ),
    ("relver", "AgentEos", "claim", '(releaseVersion InvoiceApi "4.2.0")'),
    ("blocker", "AgentDune", "claim", "(blocksRelease FlakyPdfTest InvoiceRelease)"),
    ("canary", "AgentEos", "claim", "(canaryPercent InvoiceApi 5)"),
    ("featureflag", "AgentCyra", "claim", "(featureFlag NewCheckoutFlow Off)"),
    # --- ownership
    ("owner1", "AgentFaro", "claim", "(ownsService PaymentsTeam LedgerService)"),
    ("oncall", "AgentFaro", "claim", "(onCallThisWeek InvoiceApi Dana)"),
    ("runbook", "AgentFaro", "claim", "(maintains Dana DeployRunbook)"),
    ("codeowner", "AgentFaro", "claim", "(codeOwner PdfRenderer Mei)"),
    ("security", "AgentFaro", "claim", '(escalationContact Security "security@acme.example")'),
    # --- the product's rules
    ("vat", "AgentDune", "claim", "(roundingMode VatCalculation HalfUp)"),
    ("vatde", "AgentDune", "claim", "(vatRatePercent Germany 19)"),
    ("precision", "AgentDune", "claim", "(currencyPrecision Eur 2)"),
    (
        "immutable",
        "AgentDune",
        "claim",
        '(decision Billing "invoices are immutable once sent; corrections are credit notes")',
    ),
    ("numbering", "AgentDune", "claim", '(invoiceNumberFormat Billing "INV-YYYY-NNNNN")'),
    ("dunning", "AgentDune", "claim", '(dunningSchedule Billing "reminders at 7, 14 and 30 days")'),
    ("currency", "AgentCyra", "claim", "(supportedCurrencies Billing EurUsdGbp)"),
    (
        "webhook",
        "AgentCyra",
        "claim",
        '(webhookRetry PaymentProvider "exponential backoff, 8 attempts")',
    ),
    ("idempotency", "AgentCyra", "claim", "(idempotencyKeyHeader PublicApi IdempotencyKey)"),
    ("pdf", "AgentBoreas", "claim", "(pdfLibrary PdfRenderer WeasyPrint)"),
    (
        "login",
        "AgentCyra",
        "claim",
        '(loginMethod CustomerPortal "magic link by email, no passwords")',
    ),
    ("signup", "AgentCyra", "claim", "(signUpRequiresVatId CustomerPortal)"),
    ("timezone", "AgentDune", "claim", '(dueDateTimezone Billing "the customer\'s own timezone")'),
    ("taxid", "AgentDune", "claim", "(validatesVatIdWith Billing ViesService)"),
    # --- code
    ("pytest", "AgentBoreas", "claim", "(testFramework Backend Pytest)"),
    ("py", "AgentBoreas", "claim", '(pythonVersion Backend "3.12")'),
    ("lint", "AgentBoreas", "claim", "(lintTool Backend Ruff)"),
    ("httpx", "AgentBoreas", "claim", "(usesLibrary PdfRenderer Httpx)"),
    ("orm", "AgentBoreas", "claim", "(ormLibrary Backend SqlAlchemy2)"),
    (
        "migrations",
        "AgentBoreas",
        "claim",
        '(convention Team "every migration ships with a down migration")',
    ),
    ("branch", "AgentEos", "claim", '(convention Team "branch names start with the issue number")'),
    # --- incidents: named once, explained elsewhere
    ("inc-name", "AgentFaro", "claim", '(incidentTitle Incident17 "checkout outage")'),
    ("inc-date", "AgentFaro", "claim", '(incidentDate Incident17 "2026-04-09")'),
    (
        "inc-cause",
        "AgentBoreas",
        "claim",
        '(rootCause Incident17 "the invoice database ran out of connections after the '
        'nightly export job")',
    ),
    ("inc-sev", "AgentFaro", "claim", "(incidentSeverity Incident17 Sev1)"),
    (
        "inc-fix",
        "AgentBoreas",
        "claim",
        '(remediation Incident17 "pool size raised to 200 and the export job moved to a replica")',
    ),
    ("inc2-name", "AgentFaro", "claim", '(incidentTitle Incident23 "duplicate invoice emails")'),
    (
        "inc2-cause",
        "AgentCyra",
        "claim",
        '(rootCause Incident23 "the webhook handler was not idempotent")',
    ),
    ("inc2-date", "AgentFaro", "claim", '(incidentDate Incident23 "2026-06-02")'),
    ("latency", "AgentAtlas", "claim", "(latencyP99Ms InvoiceApi 840)"),
    ("disk", "AgentAtlas", "claim", "(diskUsagePercent LogVolume 93)"),
    ("leak", "AgentBoreas", "claim", "(memoryLeakSuspected PdfRenderer)"),
    # --- notes
    (
        "note-pg",
        "AgentBoreas",
        "note",
        "PgBouncer sits in front of the invoice database in transaction mode",
    ),
    ("note-cost", "AgentAtlas", "note", "the prod cluster costs about 12,400 USD a month"),
    ("note-backup", "AgentAtlas", "note", "nightly backups at 02:00 UTC, kept for 30 days"),
    ("note-logs", "AgentAtlas", "note", "audit logs are kept for 365 days in cold storage"),
    (
        "note-err",
        "AgentCyra",
        "note",
        "the error ConnectionResetError: [Errno 104] comes from the payment provider "
        "closing idle keep-alive connections",
    ),
    (
        "note-tz",
        "AgentDune",
        "note",
        "invoice due dates shift by a day for customers east of UTC+10",
    ),
    (
        "note-signin",
        "AgentCyra",
        "note",
        "customers sign in with a magic link; sessions last 14 days",
    ),
    # --- questions and the answers that settled them
    ("ask-deploy", "AgentDune", "ask", "can I deploy to prod on friday afternoon?"),
    (
        "ans-deploy",
        "AgentEos",
        "answer",
        ("ask-deploy", "no: nothing reaches production after 15:00 on Fridays"),
    ),
    ("ask-db", "AgentCyra", "ask", "which database does the invoice service use?"),
    (
        "ans-db",
        "AgentBoreas",
        "answer",
        ("ask-db", "PostgreSQL 16 on the prod cluster, behind PgBouncer"),
    ),
    ("ask-pdf", "AgentDune", "ask", "why are invoice PDFs slow to render?"),
    (
        "ans-pdf",
        "AgentBoreas",
        "answer",
        ("ask-pdf", "fonts are fetched over the network for every page; cache them locally"),
    ),
    ("ask-credit", "AgentEos", "ask", "how do we correct a sent invoice?"),
    (
        "ans-credit",
        "AgentDune",
        "answer",
        ("ask-credit", "issue a credit note against it; a sent invoice is never edited"),
    ),
    ("ask-rounding", "AgentCyra", "ask", "do we round VAT per line or per invoice?"),
    ("ans-rounding", "AgentDune", "answer", ("ask-rounding", "per line, half up, then summed")),
    ("ask-retry", "AgentAtlas", "ask", "what happens when the payment provider webhook fails?"),
    (
        "ans-retry",
        "AgentCyra",
        "answer",
        ("ask-retry", "they retry with exponential backoff, 8 attempts over about a day"),
    ),
    ("ask-staging", "AgentFaro", "ask", "where is the staging environment?"),
    (
        "ans-staging",
        "AgentAtlas",
        "answer",
        ("ask-staging", "staging.acme.example, in the k8s namespace billing-staging"),
    ),
    ("ask-owner", "AgentDune", "ask", "who owns the ledger service?"),
    ("ans-owner", "AgentFaro", "answer", ("ask-owner", "the payments team; Dana is the contact")),
    ("ask-open", "AgentEos", "ask", "who will review the new dunning emails?"),
]

# (search, {key: grade}, held): the held-out searches were written with the rest and
# never used while tuning (every third one).
SEARCHES = [
    # abbreviations
    ("k8s version in prod", {"k8s": 2}),
    ("which k8s namespace is the invoice api in", {"k8sns": 2, "ans-staging": 1}),
    ("s3 bucket for invoice pdfs", {"s3": 2}),
    ("ec2 instance type of the pdf renderer", {"ec2": 2}),
    ("pg version", {"pg": 2, "ans-db": 1}),
    ("max db connections", {"pgpool": 2}),
    ("grpc or rest for the ledger", {"grpc": 2}),
    ("oauth2 for the public api?", {"oauth": 2}),
    ("py version backend", {"py": 2}),
    ("p99 latency of the invoice api", {"latency": 2}),
    # typos
    ("kubernetis version", {"k8s": 2}),
    ("certifcate expiry", {"tls": 2}),
    ("postgress major version", {"pg": 2}),
    ("dunnig schedule", {"dunning": 2}),
    ("idempotancy key", {"idempotency": 2}),
    ("rounding mode for vat calcualtion", {"vat": 2, "ans-rounding": 2}),
    ("memory leek in the renderer", {"leak": 2}),
    ("escalation contcat for security", {"security": 2}),
    # splits and joins
    ("roll back plan for the invoice release", {"rollback": 2}),
    ("how do customers log in", {"login": 2, "note-signin": 2}),
    ("sign up needs a vat id?", {"signup": 2}),
    ("rate limit of the public api", {"ratelimit": 2}),
    ("pdf renderer code owner", {"codeowner": 2}),
    ("deploy run book owner", {"runbook": 2}),
    ("time zone for due dates", {"timezone": 2, "note-tz": 1}),
    ("data base connections limit", {"pgpool": 2}),
    ("web hook retries", {"webhook": 2, "ans-retry": 2}),
    ("featureflag for the new checkout", {"featureflag": 2}),
    # camelCase typed lower case, and symbols typed as they are stored
    ("invoicenumberformat", {"numbering": 2}),
    ("LedgerService owner", {"owner1": 2, "ans-owner": 2}),
    ("RabbitMq", {"queue": 2}),
    ("ConnectionResetError", {"note-err": 2}),
    ("errno 104 from the payment provider", {"note-err": 2}),
    # questions whose answer was given in an answer
    ("can I deploy to prod on friday afternoon?", {"ans-deploy": 2, "friday": 2}),
    ("which database does the invoice service use", {"ans-db": 2, "pg": 1}),
    ("why are invoice pdfs slow", {"ans-pdf": 2}),
    ("how do we correct a sent invoice", {"ans-credit": 2, "immutable": 2}),
    ("do we round vat per line", {"ans-rounding": 2, "vat": 1}),
    ("payment provider webhook fails, what happens", {"ans-retry": 2, "webhook": 2}),
    ("where is staging", {"ans-staging": 2}),
    ("who owns the ledger service", {"ans-owner": 2, "owner1": 2}),
    ("is deploying on a friday afternoon allowed", {"ans-deploy": 2, "friday": 2}),
    # entities: the incident's name in one sentence, its facts in others
    ("what caused the checkout outage", {"inc-cause": 2, "inc-name": 1}),
    ("when was the checkout outage", {"inc-date": 2, "inc-name": 1}),
    ("how was the checkout outage fixed", {"inc-fix": 2, "inc-name": 1}),
    ("how severe was the checkout outage", {"inc-sev": 2, "inc-name": 1}),
    ("root cause of the duplicate invoice emails", {"inc2-cause": 2, "inc2-name": 1}),
    ("when did the duplicate invoice emails happen", {"inc2-date": 2, "inc2-name": 1}),
    # plain searches
    ("who is on call for the invoice api", {"oncall": 2}),
    ("when does the deploy freeze start", {"freeze": 2}),
    ("what blocks the invoice release", {"blocker": 2}),
    ("vat rate in germany", {"vatde": 2}),
    ("invoice number format", {"numbering": 2}),
    ("which orm", {"orm": 2}),
    ("how often are backups taken", {"note-backup": 2}),
    ("how long do we keep audit logs", {"note-logs": 2}),
    ("migration rules", {"migrations": 2}),
    ("what percent of traffic goes to the canary", {"canary": 2}),
    ("which library renders pdfs", {"pdf": 2}),
    ("how are vat ids validated", {"taxid": 2}),
]
SEARCHES = [(text, labels, i % 3 == 2) for i, (text, labels) in enumerate(SEARCHES)]

# Written after the set above, before the rules they exercise were built (issue 42's
# remainder): a date in a search, and a search about two subjects. Scored on their own
# (not in the 60), so the numbers above stay comparable with earlier runs.
LATER = [
    ("what caused the checkout outage in april", {"inc-cause": 2, "inc-name": 1}),
    ("incidents in april 2026", {"inc-date": 2, "inc-name": 2}),
    ("what went wrong on 2026-06-02", {"inc2-date": 2, "inc2-name": 2, "inc2-cause": 1}),
    ("when does the deploy freeze start in december", {"freeze": 2}),
    ("which certificate expires in january", {"tls": 2}),
    (
        "root causes of the checkout outage and the duplicate invoice emails",
        {"inc-cause": 2, "inc2-cause": 2},
    ),
    ("how severe was the checkout outage and how was it fixed", {"inc-sev": 2, "inc-fix": 2}),
    ("who owns the ledger service and the pdf renderer", {"owner1": 2, "codeowner": 2}),
]
LATER = [(text, labels, True) for text, labels in LATER]

# Searches nothing in the team set answers: any hit is noise.
NO_ANSWER = (
    "what is the weather in paris",
    "banana bread recipe",
    "who won the football match",
    "how to train a puppy",
    "best hiking trails in the alps",
)
