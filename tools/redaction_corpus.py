"""The secrets the redaction quality is measured on (tools/redaction_quality.py) and the rules are
tested on (tests/redaction/test_redaction_rules.py): one sample per format, planted as a prompt or a
tool's output has it, and each provider token bare (no key name in front) too; and benign lines
of code, commands and logs that hold none.

The secrets are made up at run time from a hash of a label (:func:`fake`, as in
tests/redaction/test_redaction.py): the same every run, and no file of the project holds a string a
secret scanner would flag. A sample is ``before + secret + after``; redacted right, it is
``before + [REDACTED:<rule>] + after``.
"""

from __future__ import annotations

import hashlib
from typing import Final, NamedTuple

__all__ = [
    "BARE",
    "BENIGN",
    "IN_CONTEXT",
    "NEAR_MISSES",
    "SAMPLES",
    "Sample",
    "fake",
]

UPPER: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER: Final = UPPER.lower()
DIGITS: Final = "0123456789"
ALNUM: Final = UPPER + LOWER + DIGITS
URLSAFE: Final = ALNUM + "_-"
B64: Final = ALNUM + "+/"
HEX: Final = "0123456789abcdef"
LOWALNUM: Final = LOWER + DIGITS


def fake(label: str, n: int, alphabet: str = ALNUM) -> str:
    """``n`` characters of ``alphabet`` derived from ``label``: a made-up secret, the same
    every run (a digit at index 1 when the alphabet has digits, as real keys have)."""
    out: list[str] = []
    counter = 0
    while len(out) < n:
        digest = hashlib.blake2b(f"{label}:{counter}".encode()).digest()
        out.extend(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    body = out[:n]
    if n >= 4 and any(c in alphabet for c in DIGITS):
        body[1] = "7"
    return "".join(body)


class Sample(NamedTuple):
    """One planted secret: ``rule`` is the rule that must name it."""

    format: str
    rule: str
    before: str
    secret: str
    after: str

    @property
    def text(self) -> str:
        return self.before + self.secret + self.after


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def _uuid(label: str) -> str:
    h = fake(label, 32, HEX)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# --- provider tokens: (format, rule, the token) -------------------------------------------------
_AGE = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
TOKENS: Final[list[tuple[str, str, str]]] = [
    ("Anthropic API key", "anthropic-api-key", "sk-ant-api03-" + fake("ant", 93, URLSAFE) + "AA"),
    ("OpenAI project key", "openai-api-key", "sk-proj-" + fake("oai", 40, URLSAFE)),
    ("AWS access key id", "aws-access-key-id", "AKIA" + fake("akia", 16, UPPER + "234567")),
    ("GitHub PAT", "github-token", "ghp_" + fake("ghp", 36)),
    ("GitHub fine-grained PAT", "github-token", f"github_pat_{fake('f1', 22)}_{fake('f2', 59)}"),
    ("GitLab PAT", "gitlab-token", "glpat-" + fake("glpat", 20, URLSAFE)),
    (
        "Slack bot token",
        "slack-token",
        f"xoxb-{fake('s1', 12, DIGITS)}-{fake('s2', 13, DIGITS)}-" + fake("s3", 24),
    ),
    ("Stripe secret key", "stripe-key", "sk_live_" + fake("stripe", 24)),
    ("Google API key", "google-api-key", "AIza" + fake("gapi", 35, URLSAFE)),
    ("Hugging Face token", "huggingface-token", "hf_" + fake("hf", 34)),
    ("Hugging Face org token", "huggingface-token", "api_org_" + fake("hforg", 34)),
    ("npm token", "npm-token", "npm_" + fake("npm", 36)),
    ("PyPI token", "pypi-token", "pypi-AgEIcHlwaS5vcmc" + fake("pypi", 60, URLSAFE)),
    ("Groq API key", "groq-api-key", "gsk_" + fake("groq", 52)),
    ("xAI API key", "xai-api-key", "xai-" + fake("xai", 80)),
    ("Perplexity API key", "perplexity-api-key", "pplx-" + fake("pplx", 48)),
    ("Replicate token", "replicate-token", "r8_" + fake("r8", 37)),
    ("OpenRouter key", "openrouter-api-key", "sk-or-v1-" + fake("openrouter", 64, HEX)),
    ("Langfuse secret key", "langfuse-secret-key", "sk-lf-" + _uuid("langfuse")),
    (
        "LangSmith key",
        "langsmith-api-key",
        f"lsv2_pt_{fake('ls1', 32, HEX)}_{fake('ls2', 10, HEX)}",
    ),
    ("Cerebras key", "cerebras-api-key", "csk-" + fake("cerebras", 48, LOWALNUM)),
    ("Pinecone key", "pinecone-api-key", f"pcsk_{fake('pc1', 6)}_{fake('pc2', 60)}"),
    ("AWS Bedrock API key", "aws-bedrock-api-key", "ABSK" + fake("bedrock", 100, B64) + "="),
    ("DigitalOcean PAT", "digitalocean-token", "dop_v1_" + fake("do", 64, HEX)),
    ("DigitalOcean OAuth", "digitalocean-token", "doo_v1_" + fake("doo", 64, HEX)),
    ("Alibaba access key id", "alibaba-access-key-id", "LTAI" + fake("ali", 20)),
    ("Azure AD client secret", "azure-ad-client-secret", fake("az1", 3) + "8Q~" + fake("az2", 34)),
    ("Google OAuth client secret", "google-oauth-client-secret", "GOCSPX-" + fake("gocspx", 28)),
    ("Google OAuth access token", "google-oauth-token", "ya29." + fake("ya29", 120, URLSAFE)),
    (
        "Cloudflare origin CA key",
        "cloudflare-origin-ca-key",
        f"v1.0-{fake('cf1', 24, HEX)}-{fake('cf2', 146, HEX)}",
    ),
    ("Heroku API key (new)", "heroku-api-key", "HRKU-AA" + fake("heroku", 58, URLSAFE)),
    ("Fly.io token", "fly-token", "fm2_" + fake("fly", 120, B64)),
    ("Render API key", "render-api-key", "rnd_" + fake("render", 32)),
    ("Supabase access token", "supabase-token", "sbp_" + fake("supa", 40, HEX)),
    ("PlanetScale token", "planetscale-token", "pscale_tkn_" + fake("pscale", 43, URLSAFE)),
    ("Databricks token", "databricks-token", "dapi" + fake("databricks", 32, HEX)),
    (
        "Terraform Cloud token",
        "terraform-cloud-token",
        f"{fake('tf1', 14)}.atlasv1.{fake('tf2', 67, URLSAFE)}",
    ),
    ("Vault service token", "vault-token", "hvs." + fake("vault", 90, URLSAFE)),
    ("Vault batch token", "vault-token", "hvb." + fake("vaultb", 140, URLSAFE)),
    ("Doppler token", "doppler-token", "dp.pt." + fake("doppler", 43)),
    ("Pulumi token", "pulumi-token", "pul-" + fake("pulumi", 40, HEX)),
    ("Scalingo token", "scalingo-token", "tk-us-" + fake("scalingo", 48, URLSAFE)),
    ("Tailscale auth key", "tailscale-key", f"tskey-auth-{fake('ts1', 12)}-{fake('ts2', 30)}"),
    ("Infracost key", "infracost-api-key", "ico-" + fake("ico", 32)),
    ("Docker Hub PAT", "docker-hub-token", "dckr_pat_" + fake("dckr", 27, URLSAFE)),
    ("JFrog API key", "jfrog-token", "AKCp" + fake("jfrog", 69)),
    ("RubyGems key", "rubygems-token", "rubygems_" + fake("gems", 48, HEX)),
    ("Clojars token", "clojars-token", "CLOJARS_" + fake("clojars", 60, LOWALNUM)),
    ("NuGet key", "nuget-api-key", "oy2" + fake("nuget", 43, LOWALNUM)),
    ("Atlassian API token", "atlassian-api-token", "ATATT3xFfGF0" + fake("atl", 180, URLSAFE)),
    ("Buildkite token", "buildkite-token", "bkua_" + fake("bk", 40, HEX)),
    ("CircleCI PAT", "circleci-token", f"CCIPAT_{fake('cci1', 22)}_{fake('cci2', 40, HEX)}"),
    ("SonarQube token", "sonarqube-token", "squ_" + fake("sonar", 40, HEX)),
    (
        "Sourcegraph token",
        "sourcegraph-token",
        f"sgp_{fake('sg1', 16, HEX)}_{fake('sg2', 40, HEX)}",
    ),
    ("Linear API key", "linear-api-key", "lin_api_" + fake("linear", 40)),
    ("Figma token", "figma-token", "figd_" + fake("figma", 40, URLSAFE)),
    ("Postman API key", "postman-api-key", f"PMAK-{fake('pm1', 24, HEX)}-{fake('pm2', 34, HEX)}"),
    ("ReadMe API key", "readme-api-key", "rdme_" + fake("rdme", 70, LOWALNUM)),
    ("Sentry user token", "sentry-token", "sntryu_" + fake("sentry", 64, HEX)),
    ("Frame.io token", "frameio-token", "fio-u-" + fake("fio", 64, URLSAFE)),
    ("Typeform token", "typeform-token", "tfp_" + fake("tfp", 59)),
    ("Prefect API key", "prefect-api-key", "pnu_" + fake("prefect", 36)),
    ("Octopus Deploy key", "octopus-api-key", "API-" + fake("octo", 26, UPPER + DIGITS)),
    (
        "Harness PAT",
        "harness-token",
        f"pat.{fake('h1', 22, URLSAFE)}.{fake('h2', 24, HEX)}.{fake('h3', 20)}",
    ),
    ("Airtable PAT", "airtable-token", f"pat{fake('at1', 14)}.{fake('at2', 64, HEX)}"),
    ("age secret key", "age-secret-key", "AGE-SECRET-KEY-1" + fake("age", 58, _AGE)),
    ("1Password service account", "1password-token", "ops_eyJ" + fake("1p", 300, B64)),
    ("Notion token", "notion-token", "ntn_" + fake("ntn1", 11, DIGITS) + fake("ntn2", 35)),
    (
        "SendGrid API key",
        "sendgrid-api-key",
        f"SG.{fake('sg-a', 22, URLSAFE)}.{fake('sg-b', 43, URLSAFE)}",
    ),
    ("Mailgun API key", "mailgun-api-key", "key-" + fake("mailgun", 32, HEX)),
    ("Mailchimp API key", "mailchimp-api-key", fake("mailchimp", 32, HEX) + "-us14"),
    ("Brevo API key", "brevo-api-key", f"xkeysib-{fake('brevo1', 64, HEX)}-{fake('brevo2', 16)}"),
    ("Twilio API key", "twilio-api-key", "SK" + fake("twsk", 32, HEX)),
    (
        "Telegram bot token",
        "telegram-bot-token",
        fake("tg1", 10, DIGITS) + ":AA" + fake("tg2", 33, URLSAFE),
    ),
    ("Shopify access token", "shopify-token", "shpat_" + fake("shopify", 32, HEX)),
    ("Shopify shared secret", "shopify-token", "shpss_" + fake("shopss", 32, HEX)),
    ("Square secret", "square-token", "sq0csp-" + fake("square", 43, URLSAFE)),
    ("Square access token", "square-token", "EAAA" + fake("squareat", 60, URLSAFE)),
    ("Facebook access token", "facebook-access-token", "EAAG" + fake("fb", 150)),
    ("Flutterwave secret key", "flutterwave-key", "FLWSECK_TEST-" + fake("flw", 32, HEX) + "-X"),
    ("Duffel token", "duffel-token", "duffel_live_" + fake("duffel", 43, URLSAFE)),
    ("Shippo token", "shippo-token", "shippo_live_" + fake("shippo", 40, HEX)),
    ("EasyPost key", "easypost-token", "EZAK" + fake("easypost", 54)),
    ("Salesforce session id", "salesforce-token", "00D" + fake("sf1", 15) + "!" + fake("sf2", 96)),
    ("New Relic user key", "new-relic-key", "NRAK-" + fake("nr", 27, UPPER + DIGITS)),
    (
        "Dynatrace token",
        "dynatrace-token",
        f"dt0c01.{fake('dt1', 24, UPPER + DIGITS)}.{fake('dt2', 64, UPPER + DIGITS)}",
    ),
    ("Grafana Cloud token", "grafana-token", "glc_" + fake("glc", 80, B64) + "=="),
    (
        "Grafana service account",
        "grafana-token",
        f"glsa_{fake('glsa1', 32)}_{fake('glsa2', 8, HEX)}",
    ),
    ("Dropbox token", "dropbox-token", "sl." + fake("dropbox", 140, URLSAFE)),
    (
        "Mapbox secret token",
        "mapbox-secret-token",
        f"sk.eyJ{fake('mb1', 60, URLSAFE)}.{fake('mb2', 22)}",
    ),
    ("Yandex API key", "yandex-api-key", "AQVN" + fake("yandex", 36, URLSAFE)),
    (
        "Twitter bearer token",
        "twitter-bearer-token",
        "A" * 22 + fake("tw1", 20) + "%3D" + fake("tw2", 50),
    ),
    (
        "JWT",
        "jwt",
        f"eyJhbGciOiJIUzI1NiJ9.eyJ{fake('jwt1', 40, URLSAFE)}.{fake('jwt2', 43, URLSAFE)}",
    ),
    (
        "Base64 private key",
        "encoded-private-key",
        _b64(b"-----BEGIN RSA PRIVATE KEY-----\n" + fake("pk", 120, B64).encode()),
    ),
]

BARE: Final[list[Sample]] = [
    Sample(f"{name} (bare)", rule, "I found this in the old notes: ", token, " (is it still live?)")
    for name, rule, token in TOKENS
]
"""Every provider token with no key name in front of it, in a sentence."""

# --- in context: as a prompt or a tool's output has them -----------------------------------------
_TW_SID = "AC" + fake("twsid", 32, HEX)
_PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(fake(f"ssh{i}", 70, B64) for i in range(4))
    + "\n-----END OPENSSH PRIVATE KEY-----"
)
_DOCKER_AUTH = _b64(f"deploy:{fake('docker-pw', 20)}".encode())
_NPM_AUTH = _b64(f"ci:{fake('npm-pw', 16)}".encode())

IN_CONTEXT: Final[list[Sample]] = [
    # the eleven formats of issue 26
    Sample(
        "Twilio auth token in a client call",
        "twilio-auth-token",
        f"client = Client('{_TW_SID}', '",
        fake("twauth", 32, HEX),
        "')",
    ),
    Sample(
        "dockercfg auth",
        "registry-auth",
        '{"auths": {"https://index.docker.io/v1/": {"auth": "',
        _DOCKER_AUTH,
        '"}}}',
    ),
    Sample(
        "doctl auth init -t",
        "digitalocean-token",
        "$ doctl auth init -t ",
        "dop_v1_" + fake("doctl", 64, HEX),
        "\nValidating token... OK",
    ),
    Sample(
        "X-Shopify-Access-Token header",
        "shopify-token",
        "curl -H 'X-Shopify-Access-Token: ",
        "shpat_" + fake("shop-h", 32, HEX),
        "' https://x.myshopify.com",
    ),
    Sample(
        "Square secret in config",
        "square-token",
        "SQUARE_APP_SECRET: ",
        "sq0csp-" + fake("square-c", 43, URLSAFE),
        "\n",
    ),
    Sample(
        "mysql -p<password>",
        "cli-password",
        "mysql -h db.internal -u root -p",
        "Zx9" + fake("mysql", 12),
        " shop < dump.sql",
    ),
    Sample(
        "VAULT_TOKEN=hvs.",
        "vault-token",
        "export VAULT_TOKEN=",
        "hvs." + fake("vault-env", 24, URLSAFE),
        "\nvault kv get secret/app",
    ),
    Sample(
        "Terraform credentials token",
        "terraform-cloud-token",
        'credentials "app.terraform.io" {\n  token = "',
        f"{fake('tfc1', 14)}.atlasv1.{fake('tfc2', 67, URLSAFE)}",
        '"\n}',
    ),
    Sample(
        "age key file",
        "age-secret-key",
        "# created: 2026-01-02T10:00:00Z\n# public key: age1qy\n",
        "AGE-SECRET-KEY-1" + fake("agefile", 58, _AGE),
        "\n",
    ),
    Sample(
        "kubeconfig client-key-data",
        "kubeconfig-client-key",
        "users:\n- name: admin\n  user:\n    client-key-data: ",
        fake("kubekey", 200, B64) + "=",
        "\n",
    ),
    Sample(
        "Postman API key in an env var",
        "postman-api-key",
        "POSTMAN_API_KEY=",
        f"PMAK-{fake('pmk1', 24, HEX)}-{fake('pmk2', 34, HEX)}",
        "\n",
    ),
    # others: commands, config files, headers
    Sample(
        "SendGrid key in code",
        "sendgrid-api-key",
        "sg = SendGridAPIClient('",
        f"SG.{fake('sgc1', 22, URLSAFE)}.{fake('sgc2', 43, URLSAFE)}",
        "')",
    ),
    Sample(
        "Databricks host and token",
        "databricks-token",
        "[DEFAULT]\nhost = https://adb-1.azuredatabricks.net\ntoken = ",
        "dapi" + fake("dbx-cfg", 32, HEX),
        "\n",
    ),
    Sample(
        "Mailgun key in requests auth",
        "mailgun-api-key",
        'requests.post(url, auth=("api", "',
        "key-" + fake("mg-code", 32, HEX),
        '"))',
    ),
    Sample(".npmrc _auth", "registry-auth", "//registry.example.com/:_auth=", _NPM_AUTH, "\n"),
    Sample(
        "sshpass -p",
        "cli-password",
        "sshpass -p '",
        "S3cure" + fake("sshpass", 8),
        "' ssh deploy@web1",
    ),
    Sample("redis-cli -a", "cli-password", "redis-cli -h cache -a ", fake("redis", 24), " ping"),
    Sample(
        "docker login -p",
        "cli-password",
        "docker login registry.example.com -u ci -p ",
        fake("dlogin", 24),
        "\n",
    ),
    Sample(
        "--password flag",
        "cli-secret-flag",
        "./manage.py createuser --password ",
        "Pa55" + fake("flag", 10),
        "\n",
    ),
    Sample(
        "--token= flag",
        "cli-secret-flag",
        "runner register --token=",
        fake("runner", 30),
        " --url x",
    ),
    Sample(
        ".netrc",
        "netrc-password",
        "machine api.example.com\n  login me@example.com\n  password ",
        fake("netrc", 24),
        "\n",
    ),
    Sample(
        "PuTTY key",
        "putty-private-key",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\nAAAA\nBBBB\n"
        "Private-Lines: 1",
        "\n" + fake("ppk", 44, B64),
        "\nPrivate-MAC: 00ff\n",
    ),
    Sample(
        "Azure storage connection string",
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=",
        fake("azkey", 86, B64) + "==",
        ";EndpointSuffix=core.windows.net",
    ),
    Sample(
        "Azure SAS URL",
        "azure-storage-key",
        "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&se=2026-01-01&sp=r&sig=",
        fake("sas", 43) + "%3D",
        "",
    ),
    Sample(
        "Discord webhook",
        "webhook-url",
        "curl -X POST https://discord.com/api/webhooks/123456789012345678/",
        fake("discord", 68, URLSAFE),
        "",
    ),
    Sample(
        "Teams webhook",
        "webhook-url",
        "TEAMS=https://acme.webhook.office.com/webhookb2/",
        f"{_uuid('t1')}@{_uuid('t2')}/IncomingWebhook/{fake('t3', 32)}",
        "\n",
    ),
    Sample(
        "Authorization: token",
        "authorization-token",
        "Authorization: token ",
        fake("ghtok", 40, HEX),
        "\r\n",
    ),
    Sample(
        "Okta SSWS header",
        "authorization-token",
        '"Authorization": "SSWS ',
        "00" + fake("okta", 40, URLSAFE),
        '"',
    ),
    Sample("x-api-token header", "api-key-header", "X-API-Token: ", fake("xapitok", 32), "\n"),
    Sample(
        "Ocp-Apim-Subscription-Key",
        "api-key-header",
        "Ocp-Apim-Subscription-Key: ",
        fake("apim", 32, HEX),
        "\n",
    ),
    Sample(
        "PGPASSWORD",
        "secret-assignment",
        "PGPASSWORD=",
        "pg" + fake("pgpass", 14),
        " psql -h db app",
    ),
    Sample(
        "Twilio token in .env",
        "secret-assignment",
        "TWILIO_AUTH_TOKEN=",
        fake("twenv", 32, HEX),
        "\n",
    ),
    Sample("Private key in a tool output", "private-key", "$ cat ~/.ssh/id_ed25519\n", _PEM, "\n$"),
    Sample(
        "AWS secret key in credentials",
        "aws-secret-access-key",
        "[default]\naws_secret_access_key = ",
        fake("awssec", 40, B64),
        "\n",
    ),
    Sample(
        "URL password",
        "url-password",
        "DATABASE_URL=postgres://app:",
        fake("dburl", 20),
        "@db:5432/app",
    ),
    Sample(
        "Bearer header", "bearer-token", "Authorization: Bearer ", fake("bearer", 40, URLSAFE), "\n"
    ),
    Sample(
        "Slack webhook",
        "slack-webhook",
        "https://hooks.slack.com/services/",
        f"T0{fake('sw1', 8, UPPER + DIGITS)}/B0{fake('sw2', 8)}/{fake('sw3', 24)}",
        "",
    ),
    Sample(
        "curl -u", "curl-user", "curl -u admin:", "Tr0ub4dor" + fake("curlu", 6), " https://x/api"
    ),
    # issue 40: what a vendor's prefix does not tell
    Sample(
        "token as a URL's user",
        "url-user-token",
        "git remote add origin https://",
        fake("urltok", 40),
        "@git.example.com/team/app.git",
    ),
    Sample(
        "URL password holding '/'",
        "url-password",
        "REDIS_URL=redis://:",
        "Qx7" + fake("redis-s1", 6) + "/" + fake("redis-s2", 8),
        "@cache:6379/0",
    ),
    Sample(
        "ldapsearch -w",
        "cli-tool-password",
        "ldapsearch -x -D cn=admin,dc=acme -w ",
        "Lq7" + fake("ldap", 11),
        " -b dc=acme",
    ),
    Sample(
        "smbclient -U user%pass",
        "cli-tool-password",
        "smbclient //fs/share -U backup%",
        "Sm7" + fake("smb", 11),
        " -c ls",
    ),
    Sample(
        "aws configure set",
        "cli-tool-password",
        "aws configure set aws_secret_access_key ",
        fake("awscfg", 40, B64),
        " --profile prod",
    ),
    Sample(
        "openssl -passin pass:",
        "cli-secret-flag",
        "openssl rsa -in k.pem -passin pass:",
        "Op7" + fake("passin", 11),
        " -out k2.pem",
    ),
    Sample(".pgpass", "pgpass-password", "db:5432:shop:app:", "Pg7" + fake("pgp", 11), "\n"),
    Sample(
        "Maven settings.xml",
        "xml-secret",
        "<server><id>r</id><username>ci</username><password>",
        "Mv7" + fake("maven", 11),
        "</password></server>",
    ),
    Sample(
        "NuGet ClearTextPassword",
        "xml-secret",
        '<add key="ClearTextPassword" value="',
        "Nu7" + fake("nuget-pw", 11),
        '" />',
    ),
    Sample(
        "Bundler credentials",
        "bundler-credentials",
        "BUNDLE_ENTERPRISE__CONTRIBSYS__COM=",
        fake("bundle1", 8, HEX) + ":" + fake("bundle2", 8, HEX),
        "\n",
    ),
    Sample(
        "session cookie",
        "cookie-value",
        "Cookie: lang=en; sessionid=",
        fake("cookie", 32, LOWALNUM),
        "; theme=dark\r\n",
    ),
    Sample(
        "Azure Functions ?code=",
        "query-secret",
        "https://acme.azurewebsites.net/api/ingest?code=",
        fake("azfn", 54, URLSAFE) + "==",
        "&clientId=x",
    ),
    Sample("custom auth header", "secret-header", "X-Acme-Auth: ", fake("acmeh", 32), "\r\n"),
    Sample(
        "minisign secret key",
        "minisign-secret-key",
        "untrusted comment: minisign encrypted secret key\n",
        "RWRTY0Iy" + fake("minisign", 204, B64) + "=",
        "\n",
    ),
    Sample(
        "Firebase server key",
        "firebase-server-key",
        "FCM_SERVER_KEY=",
        "AAAA" + fake("fcm1", 7, URLSAFE) + ":APA91b" + fake("fcm2", 134, URLSAFE),
        "\n",
    ),
    Sample("LaunchDarkly SDK key", "uuid-token", "ld: ", "sdk-" + _uuid("ld-sdk"), "\n"),
    Sample(
        "Zapier webhook",
        "zapier-webhook",
        "curl -X POST https://hooks.zapier.com/hooks/catch/",
        fake("zap1", 7, DIGITS) + "/" + fake("zap2", 6, LOWALNUM),
        "/ -d x",
    ),
    Sample(
        "unknown vendor token in prose",
        "random-token",
        "the new key is ",
        "zq_live_" + fake("zq", 40),
        " and it works",
    ),
]
"""Secrets in the places a session has them: the eleven formats issue 26 found stored verbatim,
then commands, config files, connection strings and headers."""

SAMPLES: Final[list[Sample]] = IN_CONTEXT + BARE

# --- what must be left alone --------------------------------------------------------------------
BENIGN: Final[list[str]] = [
    "def redact(text: str, *, keep: bool = False) -> str:",
    "for i, line in enumerate(lines):  # skip the header",
    "    return {k: v for k, v in mapping.items() if v is not None}",
    "import numpy as np; from pathlib import Path",
    'logger.info("loaded %d rows from %s", n, path)',
    "const token = await getToken(); headers.Authorization = `Bearer ${token}`;",
    "let apiKey = process.env.OPENAI_API_KEY ?? '';",
    "password = getpass.getpass('Password: ')",
    "SECRET_KEY = os.environ['DJANGO_SECRET_KEY']",
    "mysql -u root -p shop < dump.sql",
    "mysql -h db -u app --password shop",
    "docker login -u ci --password-stdin registry.example.com < token.txt",
    "git commit -m 'fix: parse the key-value pairs' && git push -u origin main",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "sha256: " + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "id 123e4567-e89b-12d3-a456-426614174000",
    "2026-01-02T10:00:00Z INFO GET /api/items/42 200 in 13 ms",
    "tests/test_redaction.py::test_each_rule_replaces_exactly_its_secret PASSED [ 42%]",
    "npm install --save-dev @types/node typescript eslint",
    "pip install scikit-learn pandas==2.2.0 'sqlalchemy[asyncio]'",
    "kubectl get pods -n kube-system -o wide",
    "    client-certificate-data: REDACTED",
    "  token: ${SERVICE_TOKEN}",
    "export PATH=$HOME/.local/bin:$PATH",
    "sig = hmac.new(key, msg, hashlib.sha256).hexdigest()",
    "the key-value store keeps keys in sorted order",
    "See https://docs.example.com/api/webhooks/ for the payload format.",
    "machine learning models need data; login to the dashboard to see them",
    "Authorization: token required (see the docs)",
    "x-api-key: <your key here>",
    "API-Version: 2024-01-01",
    "SK_HYNIX memory; AC adapter; NR of rows",
    "patch = pathlib.Path(pattern).read_text()",
    "The patient's pathology report (pat. no. 12)",
    "sl.no, name, qty",
    "dp.dropout = 0.1; dp.hidden = 256",
    "ico-font.woff2 and favicon.ico",
    "region = 'eu-west-1'; zone = 'us-east-1a'; lang = 'en-us'",
    "--token-file /run/secrets/token --password-file /run/secrets/pw",
    "redis-cli -h cache ping",
    "sshpass -f ~/.pw ssh host",
    "AccountKey=<your-account-key>",
    "EAAA is the prefix of a Square access token",
    "ya29. is how a Google OAuth token starts",
    "hvs.<token> is the shape of a Vault token",
    "settings.VAULT_TOKEN and os.environ.API_TOKEN",
    "CLOJARS_USERNAME=me",
    "Q~ is a quantifier in some languages",
]
"""Code, commands, logs and prose that hold no secret (several of them near misses)."""

NEAR_MISSES: Final[dict[str, list[str]]] = {
    "groq-api-key": ["gsk_short", "my_gsk_" + "a1" * 26],
    "xai-api-key": ["xai-sdk version 1.2", "xai-" + "ab12" * 5],
    "perplexity-api-key": ["pplx-api docs", "pplx-" + "x1" * 10],
    "replicate-token": ["r8_" + "a" * 10],
    "openrouter-api-key": ["sk-or-v1-" + "ab" * 10],
    "langfuse-secret-key": ["sk-lf-xxxxxxxx"],
    "langsmith-api-key": ["lsv2_pt_" + "a" * 32],
    "cerebras-api-key": ["disk-" + "a1" * 24, "csk-short1"],
    "pinecone-api-key": ["pcsk_abc_short"],
    "aws-bedrock-api-key": ["ABSK is the prefix", "ABSKAAAA"],
    "digitalocean-token": ["api_v1_" + "a" * 64, "dop_v1_xyz"],
    "alibaba-access-key-id": ["LTAI is an Alibaba key id prefix", "ALTAI" + "A1" * 8],
    "azure-ad-client-secret": ["Q~ quantifier", "abc8Q~short"],
    "google-oauth-client-secret": ["GOCSPX- prefix"],
    "google-oauth-token": ["ya29.short"],
    "cloudflare-origin-ca-key": ["v1.0-beta release", "v1.0-" + "a" * 24],
    "heroku-api-key": ["HRKU-short"],
    "fly-token": ["fm2_short", "fo1_abc"],
    "render-api-key": ["rnd_seed = 42", "brnd_" + "a1" * 16],
    "supabase-token": ["sbp_short", "sb_secret_abc"],
    "planetscale-token": ["pscale_tkn_short"],
    "databricks-token": ["dapi" + "g" * 32, "dapi_client = Client()", "xdapi" + "a1" * 16],
    "terraform-cloud-token": ["token.atlasv1.short", "app.terraform.io atlasv1"],
    "vault-token": ["hvs.short", "hvs.<token>", "xhvs." + "a1" * 20],
    "doppler-token": ["dp.pt.short", "dp.dropout"],
    "pulumi-token": ["pul-" + "z" * 40, "pul-request"],
    "scalingo-token": ["tk-us-short"],
    "tailscale-key": ["tskey-auth-xyz"],
    "infracost-api-key": ["ico-font", "favico-" + "a1" * 16],
    "docker-hub-token": ["dckr_pat_x"],
    "jfrog-token": ["AKCp short"],
    "rubygems-token": ["rubygems_org = 'https://rubygems.org'"],
    "clojars-token": ["CLOJARS_USERNAME=me"],
    "nuget-api-key": ["oy2 short", "boy2" + "a" * 43],
    "atlassian-api-token": ["ATATT3 short"],
    "buildkite-token": ["bkua_short"],
    "circleci-token": ["CCIPAT_short"],
    "sonarqube-token": ["squ_" + "g" * 40, "sqp_x"],
    "sourcegraph-token": ["sgp_short"],
    "linear-api-key": ["lin_api_short", "lin_alg"],
    "figma-token": ["figd_short"],
    "postman-api-key": ["PMAK-" + "g" * 24, "PMAK-abc"],
    "readme-api-key": ["rdme_short"],
    "sentry-token": ["sntrys_short"],
    "frameio-token": ["fio-u-short"],
    "typeform-token": ["tfp_short"],
    "prefect-api-key": ["pnu_short"],
    "octopus-api-key": ["API-Version: 2024-01-01", "API-" + "a" * 26],
    "harness-token": ["pat.name.short"],
    "airtable-token": ["pathlib.Path", "pattern" + "a" * 7 + "." + "z" * 64],
    "age-secret-key": ["AGE-SECRET-KEY-1 is how age keys start", "AGE-SECRET-KEY-1" + "b" * 58],
    "1password-token": ["ops_eyJ short"],
    "notion-token": ["ntn_short", "secret_key = 'x'"],
    "sendgrid-api-key": ["SG.short.x", "SG. is the prefix"],
    "mailgun-api-key": ["key-value pairs", "private-key-" + "a" * 32, "key-" + "g" * 32],
    "mailchimp-api-key": ["en-us", "a" * 32 + "-usa"],
    "brevo-api-key": ["xkeysib-short"],
    "twilio-api-key": ["SK_HYNIX", "SK" + "g" * 32, "TASK" + "a" * 32],
    "telegram-bot-token": ["12:AA", "time 12345678:AAB"],
    "shopify-token": ["shpat_short", "shopify"],
    "square-token": ["sq0csp-short", "EAAA prefix"],
    "facebook-access-token": ["EAA short", "EAAB" + "x" * 20],
    "flutterwave-key": ["FLWSECK_TEST"],
    "duffel-token": ["duffel_test_short"],
    "shippo-token": ["shippo_live_short"],
    "easypost-token": ["EZAK short"],
    "salesforce-token": ["00D short!"],
    "new-relic-key": ["NRAK- prefix", "NR of rows"],
    "dynatrace-token": ["dt0c01.short"],
    "grafana-token": ["glc_short", "glsa_short"],
    "dropbox-token": ["sl.no", "sl.short"],
    "mapbox-secret-token": ["pk.eyJ" + "a" * 60 + "." + "b" * 22, "sk.eyJ short"],
    "yandex-api-key": ["AQVN short"],
    "twitter-bearer-token": ["A" * 60, "A" * 21 + "abc"],
    "encoded-private-key": [_b64(b"-----BEGIN CERTIFICATE-----\n" + b"x" * 60)],
    "twilio-auth-token": [
        f"client = Client('{_TW_SID}', auth_token)",
        f"Client('{_TW_SID}', os.environ['TWILIO_AUTH_TOKEN'])",
    ],
    "registry-auth": ['{"auth": "bearer"}', '"auth": "' + _b64(b"no separator here") + '"'],
    "kubeconfig-client-key": ["client-key-data: REDACTED", "client-key-data: DATA+OMITTED"],
    "azure-storage-key": ["AccountKey=<key>", "AccountKey=..."],
    "cli-password": [
        "mysql -u root -p shop",
        "mysql -u root -p$MYSQL_PASSWORD shop",
        "redis-cli -h cache ping",
        "docker login -u ci --password-stdin r.io",
    ],
    "cli-secret-flag": [
        "--password-file /run/pw",
        "--token $TOKEN",
        "--password prompt",
        "--api-key YOUR_KEY",
    ],
    "netrc-password": ["machine learning; login to see; password reset"],
    "putty-private-key": ["Private-Lines: see the spec"],
    "webhook-url": ["https://discord.com/api/webhooks/ docs"],
    "authorization-token": ["Authorization: token required", "Authorization: Bot {token}"],
    "api-key-header": ["x-api-token: <token>", "Ocp-Apim-Subscription-Key: {key}"],
    "url-user-token": ["ssh://git@github.com/acme/app.git", "https://user.name@example.com/x"],
    "cli-tool-password": [
        "date -u +%Y-%m-%dT%H:%M:%SZ",
        "ldapsearch -x -W -b dc=acme",
        "smbclient -L fs -U backup",
    ],
    "pgpass-password": ["2a:88:ab:3c:ef:01:23:45:67", "root:x:0:0:root:/root:/bin/bash"],
    "xml-secret": ["<password>${env.PASSWORD}</password>", '<add key="Username" value="ci" />'],
    "bundler-credentials": ["BUNDLE_PATH=vendor/bundle"],
    "cookie-value": ["Cookie: lang=en; theme=dark", "Set-Cookie: id=1; Path=/; HttpOnly"],
    "query-secret": ["https://x.io/cb?code=200&state=ok", "?key=value&token=abc"],
    "secret-header": ["X-Session-Expires: 2026-01-01T00:00:00Z", "X-Api-Key: <your key>"],
    "minisign-secret-key": ["RWRTY0Iy short"],
    "firebase-server-key": ["AAAA:APA91b short"],
    "uuid-token": ["api-version 2", "sdk-" + "x" * 36],
    "zapier-webhook": ["https://hooks.zapier.com/hooks/catch/ docs"],
    "random-token": [
        "msg_01XFDUDYJgAACzvnptvVoYEL toolu_01A09q90qw90lq917835lq9 req_011CVhCz5ABCDEFGH",
        "isValidUuidFilename('f52d1386-9d4c-4671-a31e-62dd6600a759.jsonl')",
        "linux-arm64ssh2libxmljssegfault-handlerredis-memory-server",
        "MLKEM1024P384PrivateKey = rust_openssl.hpke.MLKEM1024P384PrivateKey",
        "sha512-" + fake("sri", 86, B64) + "==",
        'b"$2a$06$aOK0bWUvLI0qLkc3ti5jyuAIQoqRzuqoK09kQqQ6Ou/YKDhW50/qa"',
        "Gx = 0x216936D3CD6E53FEC0A4E231FDD6DC5C692CC7609525A7B2C9562D608F25D51A",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + fake("sshpub", 43, B64) + " me@host",
    ],
}
"""For each new rule, texts it must leave alone: the prefix alone, too short, the wrong alphabet,
or a word that only looks like one."""
