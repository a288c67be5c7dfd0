"""The large redaction corpus (issue 40): some three hundred secret formats, each rendered in the
contexts a session has them in, with a held-out part the rules were not written against.

The formats are written from the public documentation of token formats (the rule lists secret
scanners publish, vendors' own pages), read as facts: a prefix, a length, an alphabet. The
secrets are made up from a hash of the format's name (:func:`tools.redaction_corpus.fake`), so
no file of the project holds a real one.

Four kinds:

* ``token``: a shape of its own (a documented prefix, or a structure), so it can be found with
  no name in front: it is planted in every context, bare ones included (a neutral JSON key, a
  custom header, a traceback, a URL's userinfo, prose);
* ``keyed``: no prefix (32 hex, 40 alphanumerics, a uuid): only its name says what it is, so it
  is planted where a name is (an ``export``, ``.env``, JSON and YAML config, a header named for
  it, a query parameter, a constructor call);
* ``password``: a password or secret on a command line or in a config file, in the places
  each tool takes it;
* ``key``: key material (PEM and the others), whole, cut, JSON-escaped, indented, its BEGIN line
  cut off.

Every sample in a tool's output as a transcript line has it, JSON-escaped, too
(``json_escaped``). :data:`HELD_OUT` families (a fifth of them, chosen by a hash of the family's
name, not by hand) are reported apart: the rules were written looking only at the misses of the
other part (``python -m tools.redaction_quality`` lists the visible misses, and only counts the
held-out ones unless asked).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Final, NamedTuple

from tools.redaction_corpus import ALNUM, B64, DIGITS, HEX, LOWALNUM, LOWER, UPPER, URLSAFE, fake

__all__ = ["FORMATS", "HELD_OUT", "Format", "Planted", "planted"]

_CLASSES: Final = {
    "a": ALNUM,
    "l": LOWALNUM,
    "L": LOWER,
    "U": UPPER,
    "A": UPPER + DIGITS,
    "h": HEX,
    "H": HEX.upper(),
    "u": URLSAFE,
    "b": B64,
    "d": DIGITS,
    "z": "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",  # base32
    "B": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",  # bech32 (age)
}
_PLACEHOLDER: Final = re.compile(r"\{([a-zA-Z])(\d*)\}")


def render(shape: str, label: str) -> str:
    """``shape`` with each ``{cN}`` replaced by N made-up characters of class ``c`` (``{x}``:
    a uuid)."""
    count = 0

    def one(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        cls, n = m.group(1), m.group(2)
        if cls == "x":
            h = fake(f"{label}#{count}", 32, HEX)
            return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        return fake(f"{label}#{count}", int(n), _CLASSES[cls])

    return _PLACEHOLDER.sub(one, shape)


class Format(NamedTuple):
    name: str
    family: str
    kind: str  # token | keyed | password | key
    secret: str
    env: str = ""  # the name it is kept under (token, keyed)
    lines: tuple[tuple[str, str, str], ...] = ()  # (context, before, after): password, key
    fragments: tuple[str, ...] = ()  # key: what must not survive (its lines)
    hidden: str = ""  # a URL's secret part (the rest of the URL may stay)


def _t(name: str, family: str, shape: str, env: str) -> Format:
    secret = render(shape, name)
    if "://" not in secret:
        return Format(name, family, "token", secret, env)
    # a URL whose path or userinfo is the credential: that part must go, the host may stay
    user = re.search(r"://(?:[^/@:]*:)?([^/@]+)@", secret)
    if user:
        return Format(name, family, "token", secret, env, hidden=user.group(1))
    start = shape.index("{")
    return Format(name, family, "token", secret, env, hidden=secret[start:].rstrip("/"))


def _k(name: str, family: str, shape: str, env: str) -> Format:
    return Format(name, family, "keyed", render(shape, name), env)


# --- tokens with a shape of their own --------------------------------------------------------
_TOKENS: Final[list[Format]] = [
    # AI providers
    _t("Anthropic API key", "anthropic", "sk-ant-api03-{u93}AA", "ANTHROPIC_API_KEY"),
    _t("Anthropic admin key", "anthropic", "sk-ant-admin01-{u93}AA", "ANTHROPIC_ADMIN_KEY"),
    _t("Anthropic OAuth token", "anthropic", "sk-ant-oat01-{u93}AA", "CLAUDE_CODE_OAUTH_TOKEN"),
    _t("OpenAI project key", "openai", "sk-proj-{u74}T3BlbkFJ{u74}", "OPENAI_API_KEY"),
    _t("OpenAI service account key", "openai", "sk-svcacct-{u58}T3BlbkFJ{u58}", "OPENAI_KEY"),
    _t("OpenAI admin key", "openai", "sk-admin-{u58}T3BlbkFJ{u58}", "OPENAI_ADMIN_KEY"),
    _t("OpenAI legacy key", "openai", "sk-{a20}T3BlbkFJ{a20}", "OPENAI_API_KEY"),
    _t("Groq key", "groq", "gsk_{a52}", "GROQ_API_KEY"),
    _t("xAI key", "xai", "xai-{a80}", "XAI_API_KEY"),
    _t("Perplexity key", "perplexity", "pplx-{a48}", "PERPLEXITY_API_KEY"),
    _t("Replicate token", "replicate", "r8_{a37}", "REPLICATE_API_TOKEN"),
    _t("OpenRouter key", "openrouter", "sk-or-v1-{h64}", "OPENROUTER_API_KEY"),
    _t("Langfuse secret key", "langfuse", "sk-lf-{x}", "LANGFUSE_SECRET_KEY"),
    _t("LangSmith personal token", "langsmith", "lsv2_pt_{h32}_{h10}", "LANGSMITH_API_KEY"),
    _t("LangSmith service key", "langsmith", "lsv2_sk_{h32}_{h10}", "LANGCHAIN_API_KEY"),
    _t("Cerebras key", "cerebras", "csk-{l48}", "CEREBRAS_API_KEY"),
    _t("Pinecone key", "pinecone", "pcsk_{a6}_{a60}", "PINECONE_API_KEY"),
    _t("Bedrock long-lived key", "aws-bedrock", "ABSK{b132}=", "AWS_BEARER_TOKEN_BEDROCK"),
    _t("Fireworks key", "fireworks", "fw_{a24}", "FIREWORKS_API_KEY"),
    _t("DeepSeek key", "deepseek", "sk-{h32}", "DEEPSEEK_API_KEY"),
    _t("ElevenLabs key", "elevenlabs", "sk_{h48}", "ELEVENLABS_API_KEY"),
    _t("NVIDIA API key", "nvidia", "nvapi-{u64}", "NVIDIA_API_KEY"),
    _t("Voyage AI key", "voyage", "pa-{u43}", "VOYAGE_API_KEY"),
    _t("Anyscale key", "anyscale", "esecret_{a26}", "ANYSCALE_API_KEY"),
    _t("Modal token secret", "modal", "as-{a22}", "MODAL_TOKEN_SECRET"),
    _t("Hugging Face token", "huggingface", "hf_{a34}", "HF_TOKEN"),
    _t("Hugging Face org token", "huggingface", "api_org_{a34}", "HUGGINGFACE_ORG_TOKEN"),
    _t("LangChain legacy key", "langsmith", "ls__{h32}", "LANGCHAIN_API_KEY"),
    # clouds
    _t("AWS access key id", "aws", "AKIA{z16}", "AWS_ACCESS_KEY_ID"),
    _t("AWS temporary key id", "aws", "ASIA{z16}", "AWS_ACCESS_KEY_ID"),
    _t("Google API key", "google", "AIza{u35}", "GOOGLE_API_KEY"),
    _t("Google OAuth client secret", "google", "GOCSPX-{u28}", "GOOGLE_CLIENT_SECRET"),
    _t("Google OAuth access token", "google", "ya29.{u150}", "GOOGLE_ACCESS_TOKEN"),
    _t("Google OAuth refresh token", "google", "1//0{u100}", "GOOGLE_REFRESH_TOKEN"),
    _t("Firebase FCM server key", "firebase", "AAAA{u7}:APA91b{u134}", "FCM_SERVER_KEY"),
    _t("Azure AD client secret", "azure", "{a3}8Q~{u34}", "AZURE_CLIENT_SECRET"),
    _t("Alibaba access key id", "alibaba", "LTAI{a20}", "ALIBABA_ACCESS_KEY_ID"),
    _t("Tencent secret id", "tencent", "AKID{a32}", "TENCENTCLOUD_SECRET_ID"),
    _t("DigitalOcean PAT", "digitalocean", "dop_v1_{h64}", "DIGITALOCEAN_TOKEN"),
    _t("DigitalOcean OAuth token", "digitalocean", "doo_v1_{h64}", "DO_OAUTH_TOKEN"),
    _t("DigitalOcean refresh token", "digitalocean", "dor_v1_{h64}", "DO_REFRESH_TOKEN"),
    _t("Cloudflare origin CA key", "cloudflare", "v1.0-{h24}-{h146}", "CF_ORIGIN_CA_KEY"),
    _t("Heroku API key", "heroku", "HRKU-AA{u58}", "HEROKU_API_KEY"),
    _t("Fly.io token", "flyio", "fm2_{b140}", "FLY_API_TOKEN"),
    _t("Fly.io org token", "flyio", "fo1_{u43}", "FLY_ACCESS_TOKEN"),
    _t("Render API key", "render", "rnd_{a32}", "RENDER_API_KEY"),
    _t("Supabase access token", "supabase", "sbp_{h40}", "SUPABASE_ACCESS_TOKEN"),
    _t("Supabase secret key", "supabase", "sb_secret_{u32}", "SUPABASE_SECRET_KEY"),
    _t("PlanetScale token", "planetscale", "pscale_tkn_{u43}", "PLANETSCALE_SERVICE_TOKEN"),
    _t("PlanetScale password", "planetscale", "pscale_pw_{u43}", "DATABASE_PASSWORD"),
    _t("PlanetScale OAuth", "planetscale", "pscale_oauth_{u43}", "PLANETSCALE_OAUTH"),
    _t("Neon API key", "neon", "napi_{l64}", "NEON_API_KEY"),
    _t("Databricks token", "databricks", "dapi{h32}", "DATABRICKS_TOKEN"),
    _t("Terraform Cloud token", "hashicorp", "{a14}.atlasv1.{u67}", "TFE_TOKEN"),
    _t("Vault service token", "hashicorp", "hvs.{u90}", "VAULT_TOKEN"),
    _t("Vault batch token", "hashicorp", "hvb.{u140}", "VAULT_BATCH_TOKEN"),
    _t("Vault legacy token", "hashicorp", "s.{a24}", "VAULT_TOKEN"),
    _t("Doppler personal token", "doppler", "dp.pt.{a43}", "DOPPLER_TOKEN"),
    _t("Doppler service token", "doppler", "dp.st.{a43}", "DOPPLER_TOKEN"),
    _t("Doppler SCIM token", "doppler", "dp.scim.{a43}", "DOPPLER_SCIM_TOKEN"),
    _t("Pulumi token", "pulumi", "pul-{h40}", "PULUMI_ACCESS_TOKEN"),
    _t("Scalingo token", "scalingo", "tk-us-{u48}", "SCALINGO_API_TOKEN"),
    _t("Tailscale auth key", "tailscale", "tskey-auth-{a12}-{a30}", "TS_AUTHKEY"),
    _t("Tailscale API key", "tailscale", "tskey-api-{a12}-{a30}", "TAILSCALE_API_KEY"),
    _t("Infracost key", "infracost", "ico-{a32}", "INFRACOST_API_KEY"),
    _t("OpenShift user token", "openshift", "sha256~{u43}", "OPENSHIFT_TOKEN"),
    _t("Yandex API key", "yandex", "AQVN{u36}", "YC_API_KEY"),
    _t("Yandex IAM token", "yandex", "t1.{u60}.{u86}", "YC_IAM_TOKEN"),
    _t("Yandex static key", "yandex", "YC{u38}", "YC_SECRET_KEY"),
    _t("Scaleway access key", "scaleway", "SCW{A17}", "SCW_ACCESS_KEY"),
    _t("Okta API token", "okta", "00{u40}", "OKTA_API_TOKEN"),
    _t("Netlify PAT", "netlify", "nfp_{a36}", "NETLIFY_AUTH_TOKEN"),
    _t("Kubernetes bootstrap token", "kubernetes", "{l6}.{l16}", "KUBEADM_TOKEN"),
    _t("ClickHouse Cloud secret", "clickhouse", "4b1d{a38}", "CLICKHOUSE_SECRET"),
    # developer tools, CI, registries
    _t("GitHub PAT", "github", "ghp_{a36}", "GITHUB_TOKEN"),
    _t("GitHub OAuth token", "github", "gho_{a36}", "GH_TOKEN"),
    _t("GitHub user-to-server token", "github", "ghu_{a36}", "GH_TOKEN"),
    _t("GitHub server-to-server token", "github", "ghs_{a36}", "GITHUB_TOKEN"),
    _t("GitHub refresh token", "github", "ghr_{a76}", "GH_REFRESH_TOKEN"),
    _t("GitHub fine-grained PAT", "github", "github_pat_{a22}_{a59}", "GITHUB_PAT"),
    _t("GitLab PAT", "gitlab", "glpat-{u20}", "GITLAB_TOKEN"),
    _t("GitLab routable PAT", "gitlab", "glpat-{u36}.01.{l9}", "GITLAB_TOKEN"),
    _t("GitLab deploy token", "gitlab", "gldt-{u20}", "CI_DEPLOY_PASSWORD"),
    _t("GitLab runner token", "gitlab", "glrt-{u20}", "RUNNER_TOKEN"),
    _t("GitLab pipeline trigger", "gitlab", "glptt-{h40}", "TRIGGER_TOKEN"),
    _t("GitLab CI job token", "gitlab", "glcbt-{a5}_{u20}", "CI_JOB_TOKEN"),
    _t("GitLab feed token", "gitlab", "glft-{u20}", "GITLAB_FEED_TOKEN"),
    _t("GitLab SCIM token", "gitlab", "glsoat-{u20}", "GITLAB_SCIM_TOKEN"),
    _t("GitLab OAuth secret", "gitlab", "gloas-{u64}", "GITLAB_OAUTH_SECRET"),
    _t("GitLab incoming mail token", "gitlab", "glimt-{u25}", "GITLAB_MAIL_TOKEN"),
    _t("GitLab agent token", "gitlab", "glagent-{u50}", "GITLAB_AGENT_TOKEN"),
    _t("GitLab feature flag token", "gitlab", "glffct-{u20}", "UNLEASH_TOKEN"),
    _t("GitLab runner registration", "gitlab", "GR1348941{u20}", "REGISTRATION_TOKEN"),
    _t("Bitbucket app password", "bitbucket", "ATBB{a32}", "BITBUCKET_APP_PASSWORD"),
    _t("Bitbucket DC token", "bitbucket", "BBDC-{u44}", "BITBUCKET_TOKEN"),
    _t("Atlassian API token", "atlassian", "ATATT3xFfGF0{u170}={H8}", "JIRA_API_TOKEN"),
    _t("Atlassian Connect token", "atlassian", "ATCTT3xFfGN0{u170}={H8}", "CONFLUENCE_TOKEN"),
    _t("Docker Hub PAT", "docker", "dckr_pat_{u27}", "DOCKERHUB_TOKEN"),
    _t("Docker Hub org token", "docker", "dckr_oat_{u32}", "DOCKER_ORG_TOKEN"),
    _t("JFrog API key", "jfrog", "AKCp{a69}", "ARTIFACTORY_API_KEY"),
    _t("JFrog reference token", "jfrog", "cmVmdGtu{a56}", "JFROG_ACCESS_TOKEN"),
    _t("RubyGems key", "rubygems", "rubygems_{h48}", "GEM_HOST_API_KEY"),
    _t("Clojars token", "clojars", "CLOJARS_{l60}", "CLOJARS_PASSWORD"),
    _t("NuGet key", "nuget", "oy2{l43}", "NUGET_API_KEY"),
    _t("npm token", "npm", "npm_{a36}", "NPM_TOKEN"),
    _t("PyPI token", "pypi", "pypi-AgEIcHlwaS5vcmc{u70}", "TWINE_PASSWORD"),
    _t("Buildkite token", "buildkite", "bkua_{h40}", "BUILDKITE_API_TOKEN"),
    _t("CircleCI PAT", "circleci", "CCIPAT_{a22}_{h40}", "CIRCLECI_TOKEN"),
    _t("SonarQube user token", "sonar", "squ_{h40}", "SONAR_TOKEN"),
    _t("SonarQube project token", "sonar", "sqp_{h40}", "SONAR_TOKEN"),
    _t("Sourcegraph token", "sourcegraph", "sgp_{h16}_{h40}", "SRC_ACCESS_TOKEN"),
    _t("Linear API key", "linear", "lin_api_{a40}", "LINEAR_API_KEY"),
    _t("Linear OAuth token", "linear", "lin_oauth_{a40}", "LINEAR_OAUTH_TOKEN"),
    _t("Figma token", "figma", "figd_{u40}", "FIGMA_TOKEN"),
    _t("Postman key", "postman", "PMAK-{h24}-{h34}", "POSTMAN_API_KEY"),
    _t("ReadMe key", "readme", "rdme_{l70}", "README_API_KEY"),
    _t("Sentry user token", "sentry", "sntryu_{h64}", "SENTRY_AUTH_TOKEN"),
    _t("Frame.io token", "frameio", "fio-u-{u64}", "FRAMEIO_TOKEN"),
    _t("Typeform token", "typeform", "tfp_{a44}_{a14}", "TYPEFORM_TOKEN"),
    _t("Prefect key", "prefect", "pnu_{a36}", "PREFECT_API_KEY"),
    _t("Octopus Deploy key", "octopus", "API-{A26}", "OCTOPUS_API_KEY"),
    _t("Harness PAT", "harness", "pat.{u22}.{a24}.{a20}", "HARNESS_API_KEY"),
    _t("Harness SAT", "harness", "sat.{u22}.{a24}.{a20}", "HARNESS_SAT"),
    _t("Airtable PAT", "airtable", "pat{a14}.{h64}", "AIRTABLE_TOKEN"),
    _t("age secret key", "age", "AGE-SECRET-KEY-1{B58}", "SOPS_AGE_KEY"),
    _t("1Password service account", "1password", "ops_eyJ{b300}", "OP_SERVICE_ACCOUNT_TOKEN"),
    _t("1Password secret key", "1password", "A3-{A6}-{A11}-{A5}-{A5}-{A5}", "OP_SECRET_KEY"),
    _t("Notion token", "notion", "ntn_{d11}{a35}", "NOTION_TOKEN"),
    _t("Notion legacy token", "notion", "secret_{a43}", "NOTION_API_KEY"),
    _t("Adobe client secret", "adobe", "p8e-{a32}", "ADOBE_CLIENT_SECRET"),
    _t("Asana PAT", "asana", "2/{d16}/{d16}:{h32}", "ASANA_ACCESS_TOKEN"),
    _t("ClickUp token", "clickup", "pk_{d8}_{A32}", "CLICKUP_API_TOKEN"),
    _t("Contentful PAT", "contentful", "CFPAT-{u43}", "CONTENTFUL_MANAGEMENT_TOKEN"),
    _t("Defined Networking key", "definednetworking", "dnkey-{u26}-{u52}", "DN_API_KEY"),
    _t("HubSpot private app token", "hubspot", "pat-na1-{x}", "HUBSPOT_ACCESS_TOKEN"),
    _t("LaunchDarkly API token", "launchdarkly", "api-{x}", "LD_API_KEY"),
    _t("LaunchDarkly SDK key", "launchdarkly", "sdk-{x}", "LD_SDK_KEY"),
    _t("PostHog personal key", "posthog", "phx_{a43}", "POSTHOG_PERSONAL_API_KEY"),
    _t("Intra42 client secret", "intra42", "s-s4t2ud-{h64}", "FT_CLIENT_SECRET"),
    _t("MaxMind license key", "maxmind", "{a6}_{a29}_mmk", "MAXMIND_LICENSE_KEY"),
    _t("SettleMint PAT", "settlemint", "sm_pat_{a16}", "SETTLEMINT_TOKEN"),
    _t("Authress key", "authress", "sc_{l12}.{l5}.acc_{l20}.{u60}", "AUTHRESS_KEY"),
    _t("Beamer token", "beamer", "b_{u44}", "BEAMER_API_KEY"),
    _t("Zoho refresh token", "zoho", "1000.{h32}.{h32}", "ZOHO_REFRESH_TOKEN"),
    _t("Stytch secret", "stytch", "secret-live-{u36}", "STYTCH_SECRET"),
    _t("Mollie live key", "mollie", "live_{a30}", "MOLLIE_API_KEY"),
    _t("Mollie test key", "mollie", "test_{a30}", "MOLLIE_TEST_KEY"),
    _t("Bitwarden access token", "bitwarden", "0.{x}.{a30}:{b22}==", "BWS_ACCESS_TOKEN"),
    _t("Resend key", "resend", "re_{a8}_{a24}", "RESEND_API_KEY"),
    _t("Mandrill key", "mandrill", "md-{u22}", "MANDRILL_API_KEY"),
    _t("Telnyx key", "telnyx", "KEY{H32}_{a22}", "TELNYX_API_KEY"),
    _t("Plaid access token", "plaid", "access-production-{x}", "PLAID_ACCESS_TOKEN"),
    _t("GoCardless token", "gocardless", "live_{u40}", "GOCARDLESS_ACCESS_TOKEN"),
    _t("Lob key", "lob", "live_{h35}", "LOB_API_KEY"),
    _t("Checkout.com key", "checkout", "sk_sbox_{l26}", "CKO_SECRET_KEY"),
    _t("Razorpay key id", "razorpay", "rzp_live_{a14}", "RAZORPAY_KEY_ID"),
    _t("Paystack secret", "paystack", "sk_live_{h40}", "PAYSTACK_SECRET_KEY"),
    _t("Braintree token", "braintree", "access_token$production${l16}${h32}", "BT_ACCESS_TOKEN"),
    _t("Adyen API key", "adyen", "AQE{u100}", "ADYEN_API_KEY"),
    # messaging, mail, commerce, payments, analytics
    _t("Slack bot token", "slack", "xoxb-{d12}-{d13}-{a24}", "SLACK_BOT_TOKEN"),
    _t("Slack user token", "slack", "xoxp-{d12}-{d12}-{d13}-{h32}", "SLACK_USER_TOKEN"),
    _t("Slack app token", "slack", "xapp-1-{A11}-{d13}-{h64}", "SLACK_APP_TOKEN"),
    _t("Slack config token", "slack", "xoxe.xoxp-1-{A163}", "SLACK_CONFIG_TOKEN"),
    _t("Slack refresh token", "slack", "xoxe-1-{A146}", "SLACK_REFRESH_TOKEN"),
    _t("Stripe secret key", "stripe", "sk_live_{a99}", "STRIPE_SECRET_KEY"),
    _t("Stripe restricted key", "stripe", "rk_live_{a99}", "STRIPE_RESTRICTED_KEY"),
    _t("Stripe test key", "stripe", "sk_test_{a24}", "STRIPE_API_KEY"),
    _t("Stripe webhook secret", "stripe", "whsec_{a32}", "STRIPE_WEBHOOK_SECRET"),
    _t("SendGrid key", "sendgrid", "SG.{u22}.{u43}", "SENDGRID_API_KEY"),
    _t("Mailgun key", "mailgun", "key-{h32}", "MAILGUN_API_KEY"),
    _t("Mailgun signing key", "mailgun", "{h32}-{h8}-{h8}", "MAILGUN_SIGNING_KEY"),
    _t("Mailchimp key", "mailchimp", "{h32}-us14", "MAILCHIMP_API_KEY"),
    _t("Brevo key", "brevo", "xkeysib-{h64}-{a16}", "BREVO_API_KEY"),
    _t("Brevo SMTP key", "brevo", "xsmtpsib-{h64}-{a16}", "BREVO_SMTP_KEY"),
    _t("Twilio API key", "twilio", "SK{h32}", "TWILIO_API_KEY"),
    _t("Telegram bot token", "telegram", "{d10}:AA{u33}", "TELEGRAM_BOT_TOKEN"),
    _t("Discord bot token", "discord", "MT{a22}.{u6}.{u38}", "DISCORD_TOKEN"),
    _t("Shopify access token", "shopify", "shpat_{h32}", "SHOPIFY_ACCESS_TOKEN"),
    _t("Shopify custom app token", "shopify", "shpca_{h32}", "SHOPIFY_TOKEN"),
    _t("Shopify private app token", "shopify", "shppa_{h32}", "SHOPIFY_PASSWORD"),
    _t("Shopify shared secret", "shopify", "shpss_{h32}", "SHOPIFY_SHARED_SECRET"),
    _t("Square secret", "square", "sq0csp-{u43}", "SQUARE_APPLICATION_SECRET"),
    _t("Square access token", "square", "EAAA{u60}", "SQUARE_ACCESS_TOKEN"),
    _t("Facebook access token", "facebook", "EAAG{a180}", "FB_ACCESS_TOKEN"),
    _t("Facebook page token", "facebook", "EAAM{a150}", "FB_PAGE_TOKEN"),
    _t("Instagram token", "instagram", "IGQV{u160}", "INSTAGRAM_ACCESS_TOKEN"),
    _t("Flutterwave secret key", "flutterwave", "FLWSECK_TEST-{h32}-X", "FLW_SECRET_KEY"),
    _t("Duffel token", "duffel", "duffel_live_{u43}", "DUFFEL_ACCESS_TOKEN"),
    _t("Shippo token", "shippo", "shippo_live_{h40}", "SHIPPO_API_TOKEN"),
    _t("EasyPost key", "easypost", "EZAK{a54}", "EASYPOST_API_KEY"),
    _t("EasyPost test key", "easypost", "EZTK{a54}", "EASYPOST_TEST_KEY"),
    _t("Salesforce session id", "salesforce", "00D{a15}!{a96}", "SF_ACCESS_TOKEN"),
    _t("New Relic user key", "newrelic", "NRAK-{A27}", "NEW_RELIC_API_KEY"),
    _t("New Relic insert key", "newrelic", "NRII-{u32}", "NEW_RELIC_INSERT_KEY"),
    _t("New Relic license key", "newrelic", "{h36}NRAL", "NEW_RELIC_LICENSE_KEY"),
    _t("Dynatrace token", "dynatrace", "dt0c01.{A24}.{A64}", "DT_API_TOKEN"),
    _t("Grafana Cloud token", "grafana", "glc_{b80}==", "GRAFANA_CLOUD_TOKEN"),
    _t("Grafana service account", "grafana", "glsa_{a32}_{h8}", "GRAFANA_TOKEN"),
    _t("Grafana API key", "grafana", "eyJrIjoi{a100}=", "GRAFANA_API_KEY"),
    _t("Dropbox token", "dropbox", "sl.{u140}", "DROPBOX_ACCESS_TOKEN"),
    _t("Dropbox long-lived token", "dropbox", "{a11}AAAAAAAAAA{u43}", "DROPBOX_TOKEN"),
    _t("Mapbox secret token", "mapbox", "sk.eyJ{u60}.{a22}", "MAPBOX_ACCESS_TOKEN"),
    _t("Twitter bearer token", "twitter", "AAAAAAAAAAAAAAAAAAAAA{a30}%3D{a50}", "TWITTER_BEARER"),
    _t("Zapier webhook", "zapier", "https://hooks.zapier.com/hooks/catch/{d7}/{l6}/", "ZAP_HOOK"),
    _t("Slack webhook", "slack", "https://hooks.slack.com/services/T{A10}/B{A10}/{a24}", "HOOK"),
    _t(
        "Discord webhook",
        "discord",
        "https://discord.com/api/webhooks/{d18}/{u68}",
        "DISCORD_WEBHOOK_URL",
    ),
    _t(
        "Teams webhook",
        "microsoft",
        "https://acme.webhook.office.com/webhookb2/{x}@{x}/IncomingWebhook/{h32}/{x}",
        "TEAMS_WEBHOOK",
    ),
    _t("Sentry DSN", "sentry", "https://{h32}@o{d6}.ingest.sentry.io/{d7}", "SENTRY_DSN"),
    _t("Cloudinary URL", "cloudinary", "cloudinary://{d15}:{u27}@acme", "CLOUDINARY_URL"),
    _t("JWT", "jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{u60}.{u43}", "SESSION_JWT"),
    _t("Ably key", "ably", "{a6}.{a6}:{u43}", "ABLY_API_KEY"),
    _t("Expo access token", "expo", "expo_{a40}", "EXPO_TOKEN"),
    _t("Snyk token", "snyk", "snyk_uat.{h8}.{u43}", "SNYK_TOKEN"),
    _t("Pinata JWT", "pinata", "eyJhbGciOiJIUzI1NiJ9.eyJ{u120}.{u43}", "PINATA_JWT"),
    _t("Deno Deploy token", "deno", "ddp_{a36}", "DENO_DEPLOY_TOKEN"),
    _t("Vercel token", "vercel", "vcp_{a56}", "VERCEL_TOKEN"),
    _t("Railway token", "railway", "rwy_{a40}", "RAILWAY_TOKEN"),
    _t("Upstash token", "upstash", "AX{u60}=", "UPSTASH_REDIS_REST_TOKEN"),
    _t("Turso token", "turso", "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJ{u80}.{u86}", "TURSO_AUTH"),
    _t("Doppler service account", "doppler", "dp.sa.{a43}", "DOPPLER_TOKEN"),
    _t("Infisical token", "infisical", "st.{x}.{h32}.{h32}", "INFISICAL_TOKEN"),
    _t("Keygen token", "keygen", "prod-{h64}v3", "KEYGEN_TOKEN"),
    _t("Fastly token", "fastly", "fst_{u32}", "FASTLY_API_TOKEN"),
    _t("Aiven token", "aiven", "AVNS_{u21}", "AIVEN_PASSWORD"),
    _t("Confluent Cloud key", "confluent", "CFLT{a12}", "CONFLUENT_KEY"),
    _t("Cohere trial key", "cohere", "co-{a40}", "CO_API_KEY"),
    _t("Mistral key", "mistral", "mst-{a32}", "MISTRAL_API_KEY"),
    _t("Together key", "together", "tgp_v1_{u43}", "TOGETHER_API_KEY"),
    _t("Jina key", "jina", "jina_{h32}{a28}", "JINA_API_KEY"),
    _t("Exa key", "exa", "exa-{x}", "EXA_API_KEY"),
    _t("Tavily key", "tavily", "tvly-{a32}", "TAVILY_API_KEY"),
    _t("Firecrawl key", "firecrawl", "fc-{h32}", "FIRECRAWL_API_KEY"),
    _t("Browserbase key", "browserbase", "bb_live_{u27}", "BROWSERBASE_API_KEY"),
    _t("E2B key", "e2b", "e2b_{h40}", "E2B_API_KEY"),
    _t("Weaviate key", "weaviate", "wcd_{a40}", "WEAVIATE_API_KEY"),
    _t("Qdrant key", "qdrant", "qdr_{u40}", "QDRANT_API_KEY"),
    _t("Helicone key", "helicone", "sk-helicone-{l7}-{l7}-{l7}-{l7}", "HELICONE_API_KEY"),
    _t("Zep key", "zep", "z_{u120}", "ZEP_API_KEY"),
    _t("Composio key", "composio", "ak_{a20}", "COMPOSIO_API_KEY"),
]

# --- secrets only their name tells ------------------------------------------------------------
_KEYED: Final[list[Format]] = [
    _k("AWS secret access key", "aws", "{b40}", "AWS_SECRET_ACCESS_KEY"),
    _k("Azure OpenAI key", "azure", "{h32}", "AZURE_OPENAI_API_KEY"),
    _k("Azure Cosmos key", "azure", "{b86}==", "COSMOS_KEY"),
    _k("Azure DevOps PAT", "azure-devops", "{l52}", "AZURE_DEVOPS_EXT_PAT"),
    _k("Adafruit key", "adafruit", "{l32}", "ADAFRUIT_IO_KEY"),
    _k("Algolia admin key", "algolia", "{h32}", "ALGOLIA_ADMIN_API_KEY"),
    _k("Alibaba secret", "alibaba", "{a30}", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
    _k("Asana client secret", "asana", "{l32}", "ASANA_CLIENT_SECRET"),
    _k("Bitbucket client secret", "bitbucket", "{u64}", "BITBUCKET_CLIENT_SECRET"),
    _k("Bittrex secret", "bittrex", "{h32}", "BITTREX_API_SECRET"),
    _k("Meraki key", "meraki", "{h40}", "MERAKI_DASHBOARD_API_KEY"),
    _k("Cloudflare API token", "cloudflare", "{u40}", "CLOUDFLARE_API_TOKEN"),
    _k("Cloudflare global key", "cloudflare", "{h37}", "CLOUDFLARE_API_KEY"),
    _k("Codecov token", "codecov", "{x}", "CODECOV_TOKEN"),
    _k("Cohere key", "cohere", "{a40}", "COHERE_API_KEY"),
    _k("Coinbase secret", "coinbase", "{u64}", "COINBASE_API_SECRET"),
    _k("Confluent secret", "confluent", "{a64}", "CONFLUENT_CLOUD_API_SECRET"),
    _k("Contentful delivery token", "contentful", "{u43}", "CONTENTFUL_ACCESS_TOKEN"),
    _k("Datadog API key", "datadog", "{h32}", "DD_API_KEY"),
    _k("Datadog app key", "datadog", "{h40}", "DD_APP_KEY"),
    _k("Discord client secret", "discord", "{u32}", "DISCORD_CLIENT_SECRET"),
    _k("Drone token", "droneci", "{a32}", "DRONE_TOKEN"),
    _k("Etsy key", "etsy", "{l24}", "ETSY_API_KEY"),
    _k("Facebook app secret", "facebook", "{h32}", "FACEBOOK_APP_SECRET"),
    _k("Fastly legacy token", "fastly", "{u32}", "FASTLY_API_KEY"),
    _k("Finicity secret", "finicity", "{a20}", "FINICITY_APP_KEY"),
    _k("Finnhub token", "finnhub", "{l20}", "FINNHUB_API_KEY"),
    _k("Flickr secret", "flickr", "{h16}", "FLICKR_API_SECRET"),
    _k("FreshBooks token", "freshbooks", "{l64}", "FRESHBOOKS_ACCESS_TOKEN"),
    _k("Gitter token", "gitter", "{h40}", "GITTER_TOKEN"),
    _k("Heroku legacy key", "heroku", "{x}", "HEROKU_API_KEY"),
    _k("HubSpot legacy key", "hubspot", "{x}", "HUBSPOT_API_KEY"),
    _k("Intercom token", "intercom", "{u60}=", "INTERCOM_ACCESS_TOKEN"),
    _k("JFrog identity token", "jfrog", "{l64}", "JFROG_IDENTITY_TOKEN"),
    _k("Kraken private key", "kraken", "{b86}==", "KRAKEN_PRIVATE_KEY"),
    _k("KuCoin secret", "kucoin", "{x}", "KUCOIN_API_SECRET"),
    _k("LaunchDarkly legacy token", "launchdarkly", "{u40}", "LAUNCHDARKLY_ACCESS_TOKEN"),
    _k("Linear client secret", "linear", "{h32}", "LINEAR_CLIENT_SECRET"),
    _k("LinkedIn client secret", "linkedin", "{a16}", "LINKEDIN_CLIENT_SECRET"),
    _k("Looker client secret", "looker", "{a24}", "LOOKER_CLIENT_SECRET"),
    _k("Mattermost token", "mattermost", "{l26}", "MATTERMOST_TOKEN"),
    _k("MessageBird key", "messagebird", "{a25}", "MESSAGEBIRD_ACCESS_KEY"),
    _k("Netlify legacy token", "netlify", "{u43}", "NETLIFY_TOKEN"),
    _k("NYTimes key", "nytimes", "{a32}", "NYT_API_KEY"),
    _k("Plaid secret", "plaid", "{h30}", "PLAID_SECRET"),
    _k("Private AI key", "privateai", "{h32}", "PRIVATE_AI_API_KEY"),
    _k("RapidAPI key", "rapidapi", "{u50}", "X_RAPIDAPI_KEY"),
    _k("Sendbird token", "sendbird", "{h40}", "SENDBIRD_API_TOKEN"),
    _k("Snyk legacy token", "snyk", "{x}", "SNYK_TOKEN"),
    _k("Sumo Logic key", "sumologic", "{a64}", "SUMO_ACCESS_KEY"),
    _k("Travis token", "travis", "{u22}", "TRAVIS_TOKEN"),
    _k("Twitch secret", "twitch", "{l30}", "TWITCH_CLIENT_SECRET"),
    _k("Twitter consumer secret", "twitter", "{a50}", "TWITTER_CONSUMER_SECRET"),
    _k("Twitter access token secret", "twitter", "{a45}", "TWITTER_ACCESS_TOKEN_SECRET"),
    _k("Zendesk token", "zendesk", "{a40}", "ZENDESK_API_TOKEN"),
    _k("Mistral key", "mistral", "{a32}", "MISTRAL_API_KEY"),
    _k("Together key", "together", "{h64}", "TOGETHER_API_KEY"),
    _k("Weights & Biases key", "wandb", "{h40}", "WANDB_API_KEY"),
    _k("AssemblyAI key", "assemblyai", "{h32}", "ASSEMBLYAI_API_KEY"),
    _k("Deepgram key", "deepgram", "{h40}", "DEEPGRAM_API_KEY"),
    _k("Linode token", "linode", "{h64}", "LINODE_TOKEN"),
    _k("Vultr key", "vultr", "{A36}", "VULTR_API_KEY"),
    _k("Hetzner token", "hetzner", "{a64}", "HCLOUD_TOKEN"),
    _k("Scaleway secret", "scaleway", "{x}", "SCW_SECRET_KEY"),
    _k("Vercel legacy token", "vercel", "{a24}", "VERCEL_TOKEN"),
    _k("Railway token", "railway", "{x}", "RAILWAY_API_TOKEN"),
    _k("Postmark token", "postmark", "{x}", "POSTMARK_SERVER_TOKEN"),
    _k("SparkPost key", "sparkpost", "{h40}", "SPARKPOST_API_KEY"),
    _k("Mailjet secret", "mailjet", "{h32}", "MJ_APIKEY_PRIVATE"),
    _k("Plivo auth token", "plivo", "{a40}", "PLIVO_AUTH_TOKEN"),
    _k("Vonage secret", "vonage", "{a16}", "VONAGE_API_SECRET"),
    _k("Pusher secret", "pusher", "{h20}", "PUSHER_APP_SECRET"),
    _k("Segment write key", "segment", "{a32}", "SEGMENT_WRITE_KEY"),
    _k("Mixpanel secret", "mixpanel", "{h32}", "MIXPANEL_API_SECRET"),
    _k("Amplitude secret", "amplitude", "{h32}", "AMPLITUDE_SECRET_KEY"),
    _k("Honeycomb key", "honeycomb", "{a22}", "HONEYCOMB_API_KEY"),
    _k("Rollbar token", "rollbar", "{h32}", "ROLLBAR_ACCESS_TOKEN"),
    _k("Bugsnag key", "bugsnag", "{h32}", "BUGSNAG_API_KEY"),
    _k("PayPal secret", "paypal", "{u80}", "PAYPAL_CLIENT_SECRET"),
    _k("Binance secret", "binance", "{a64}", "BINANCE_API_SECRET"),
    _k("Razorpay secret", "razorpay", "{a24}", "RAZORPAY_KEY_SECRET"),
    _k("Auth0 client secret", "auth0", "{u64}", "AUTH0_CLIENT_SECRET"),
    _k("Box client secret", "box", "{a32}", "BOX_CLIENT_SECRET"),
    _k("Spotify client secret", "spotify", "{h32}", "SPOTIFY_CLIENT_SECRET"),
    _k("Trello token", "trello", "{h64}", "TRELLO_TOKEN"),
    _k("Todoist token", "todoist", "{h40}", "TODOIST_API_TOKEN"),
    _k("Miro token", "miro", "{u32}", "MIRO_ACCESS_TOKEN"),
    _k("Zoom client secret", "zoom", "{a32}", "ZOOM_CLIENT_SECRET"),
    _k("Jenkins API token", "jenkins", "11{h32}", "JENKINS_API_TOKEN"),
    _k("Gitea token", "gitea", "{h40}", "GITEA_TOKEN"),
    _k("Consul token", "consul", "{x}", "CONSUL_HTTP_TOKEN"),
    _k("Nomad token", "nomad", "{x}", "NOMAD_TOKEN"),
    _k("ngrok authtoken", "ngrok", "2{a26}_{a21}", "NGROK_AUTHTOKEN"),
    _k("IBM Cloud key", "ibm", "{u44}", "IBMCLOUD_API_KEY"),
    _k("Snowflake password", "snowflake", "{a20}", "SNOWFLAKE_PASSWORD"),
    _k("Django secret key", "django", "django-insecure-{u50}", "DJANGO_SECRET_KEY"),
    _k("Rails master key", "rails", "{h32}", "RAILS_MASTER_KEY"),
    _k("Portkey key", "portkey", "{b32}", "PORTKEY_API_KEY"),
    _k("Sidekiq credentials", "sidekiq", "{h8}:{h8}", "BUNDLE_ENTERPRISE__CONTRIBSYS__COM"),
    _k("Laravel app key", "laravel", "base64:{b43}=", "APP_KEY"),
    _k("NextAuth secret", "nextauth", "{b43}=", "NEXTAUTH_SECRET"),
    _k("Flask secret key", "flask", "{h64}", "FLASK_SECRET_KEY"),
    _k("JWT signing secret", "jwt", "{u64}", "JWT_SECRET"),
    _k("Encryption key", "generic", "{b43}=", "ENCRYPTION_KEY"),
    _k("Webhook signing secret", "generic", "{h64}", "WEBHOOK_SIGNING_SECRET"),
    _k("Harbor robot secret", "harbor", "{a32}", "HARBOR_ROBOT_SECRET"),
    _k("Quay token", "quay", "{A40}", "QUAY_ROBOT_TOKEN"),
    _k("Codacy token", "codacy", "{a20}", "CODACY_PROJECT_TOKEN"),
    _k("Coveralls token", "coveralls", "{a32}", "COVERALLS_REPO_TOKEN"),
    _k("Semgrep token", "semgrep", "{h64}", "SEMGREP_APP_TOKEN"),
    _k("Storyblok token", "storyblok", "{a22}tt", "STORYBLOK_TOKEN"),
    _k("Sanity token", "sanity", "sk{a180}", "SANITY_API_TOKEN"),
    _k("Paddle key", "paddle", "{h50}", "PADDLE_API_KEY"),
    _k("Gumroad token", "gumroad", "{u43}", "GUMROAD_ACCESS_TOKEN"),
    _k("Webex token", "webex", "{a64}_{A4}_{x}", "WEBEX_ACCESS_TOKEN"),
    _k("OneSignal key", "onesignal", "{a48}", "ONESIGNAL_REST_API_KEY"),
    _k("Upstash QStash signing key", "upstash", "sig_{a28}", "QSTASH_CURRENT_SIGNING_KEY"),
    _k("Mux secret", "mux", "{b75}", "MUX_TOKEN_SECRET"),
    _k("Clerk secret", "clerk", "sk_live_{a40}", "CLERK_SECRET_KEY"),
    _k("WorkOS key", "workos", "sk_{a60}", "WORKOS_API_KEY"),
]


# --- passwords on command lines and in config files -----------------------------------------
def _pw(label: str) -> str:
    """A made-up password: letters, digits and a few punctuation marks a shell does not mind."""
    return "Q" + fake(label, 13, ALNUM + "!*+-_.")


def _passwords() -> list[Format]:
    out: list[Format] = []

    def add(name: str, family: str, *templates: str) -> None:
        secret = _pw(name)
        lines: list[tuple[str, str, str]] = []
        for i, t in enumerate(templates):
            before, _, after = t.partition("{pw}")
            lines.append((f"{name} #{i}", before, after))
        out.append(Format(name, family, "password", secret, "", tuple(lines)))

    add(
        "aws configure set",
        "aws-cli",
        "$ aws configure set aws_secret_access_key {pw} --profile prod\n",
    )
    add(
        "ldapsearch -w",
        "ldap",
        "ldapsearch -x -H ldap://dc1 -D cn=admin,dc=acme -w {pw} -b dc=acme",
    )
    add("ldapmodify -w", "ldap", "ldapmodify -D 'cn=admin,dc=acme' -w '{pw}' -f change.ldif")
    add("smbclient -U user%pass", "smb", "smbclient //fs/share -U backup%{pw} -c 'ls'")
    add("openssl -passin pass:", "openssl", "openssl rsa -in key.pem -passin pass:{pw} -out k.pem")
    add(
        "openssl -passout pass:",
        "openssl",
        "openssl pkcs12 -export -passout 'pass:{pw}' -out a.p12",
    )
    add(
        "openssl enc -k", "openssl", "openssl enc -aes-256-cbc -salt -k {pw} -in db.sql -out db.enc"
    )
    add("mysql -p", "mysql", "mysql -h db.internal -u root -p{pw} shop < dump.sql")
    add("mysql --password=", "mysql", "mysqldump --user=app --password={pw} shop > shop.sql")
    add("psql connection URI", "postgres", "psql 'postgresql://app:{pw}@db.internal:5432/shop'")
    add("sqlcmd -P", "mssql", "sqlcmd -S db.internal -U sa -P '{pw}' -Q 'SELECT 1'")
    add(
        "mongosh -p", "mongodb", "mongosh --host db -u admin -p {pw} --authenticationDatabase admin"
    )
    add("redis-cli -a", "redis", "redis-cli -h cache.internal -a {pw} --no-auth-warning info")
    add("sshpass -p", "ssh", "sshpass -p '{pw}' ssh deploy@web1 uptime")
    add("htpasswd -b", "apache", "htpasswd -b -c /etc/nginx/.htpasswd admin {pw}")
    add("keytool -storepass", "java", "keytool -list -keystore app.jks -storepass {pw}")
    add("keytool -keypass", "java", "keytool -genkey -alias app -keypass {pw} -keystore k.jks")
    add("zip -P", "zip", "zip -P {pw} -r backup.zip data/")
    add("7z -p", "zip", "7z a -p{pw} -mhe=on backup.7z data/")
    add("gpg --passphrase", "gpg", "gpg --batch --passphrase {pw} -d secrets.gpg")
    add("docker login -p", "docker", "docker login registry.acme.io -u ci -p {pw}")
    add("wget --password", "wget", "wget --user=ci --password={pw} https://repo.acme.io/a.tgz")
    add("curl -u", "curl", "curl -fsS -u admin:{pw} https://jenkins.acme.io/api/json")
    add("net use", "windows", "net use Z: \\\\fs\\share {pw} /user:ACME\\backup")
    add("xfreerdp /p:", "rdp", "xfreerdp /v:10.0.0.5 /u:admin /p:{pw} /cert:ignore")
    add("rabbitmqctl add_user", "rabbitmq", "rabbitmqctl add_user app {pw}")
    add("--password flag", "cli", "./manage.py createsuperuser --username admin --password {pw}")
    add(
        "git credential URL",
        "git",
        "git clone https://deploy:{pw}@git.acme.io/team/app.git",
        "https://deploy:{pw}@git.acme.io\n",
    )
    add(".pgpass", "postgres", "db.internal:5432:shop:app:{pw}\n", "*:*:*:replicator:{pw}\n")
    add(
        "Maven settings.xml",
        "maven",
        "<server>\n  <id>releases</id>\n  <username>ci</username>\n  <password>{pw}</password>\n"
        "</server>",
    )
    add(
        "NuGet ClearTextPassword",
        "nuget",
        '<packageSourceCredentials>\n  <acme>\n    <add key="Username" value="ci" />\n'
        '    <add key="ClearTextPassword" value="{pw}" />\n  </acme>\n</packageSourceCredentials>',
    )
    add(".netrc", "netrc", "machine api.acme.io login ci password {pw}\n")
    add(
        "docker config auths",
        "docker",
        '{"auths": {"registry.acme.io": {"username": "ci", "password": "{pw}"}}}',
    )
    add("Gradle properties", "gradle", "systemProp.https.proxyPassword={pw}\nmavenPassword={pw}\n")
    add("pip.conf index URL", "pip", "[global]\nindex-url = https://ci:{pw}@pypi.acme.io/simple\n")
    add(
        "Spring datasource",
        "spring",
        "spring.datasource.url=jdbc:postgresql://db/shop\nspring.datasource.password={pw}\n",
    )
    add("INI password", "ini", "[database]\nhost = db.internal\nuser = app\npassword = {pw}\n")
    add("XML password attribute", "xml", '<connection user="app" password="{pw}" host="db" />')
    add(
        "ADO.NET connection string",
        "dotnet",
        "Server=db;Database=shop;User Id=sa;Password={pw};TrustServerCertificate=true",
    )
    slashed = _pw("redis-slash")
    out.append(
        Format(
            "Redis URL password with slash",
            "redis",
            "password",
            slashed[:6] + "/" + slashed[6:],
            "",
            (("REDIS_URL", "REDIS_URL=redis://:", "@cache.internal:6379/0\n"),),
        )
    )
    add("MongoDB SRV URL", "mongodb", "mongodb+srv://app:{pw}@cluster0.abcde.mongodb.net/shop")
    add("AMQP URL", "rabbitmq", "amqp://app:{pw}@mq.internal:5672/%2F")
    # cookies and URL keys
    out.append(
        Format(
            "Cookie sessionid",
            "cookie",
            "password",
            fake("cookie-sessionid", 32, LOWALNUM),
            "",
            (
                ("Cookie header", "Cookie: csrftoken=abc; sessionid=", "; theme=dark\r\n"),
                ("curl -b", "curl -b 'sessionid=", "' https://app.acme.io/admin/"),
            ),
        )
    )
    for cookie, shape in (
        ("connect.sid", "s%3A{u32}.{u43}"),
        ("JSESSIONID", "{H32}"),
        ("PHPSESSID", "{l26}"),
        ("laravel_session", "eyJpdiI6{b120}"),
        ("_session_id", "{h32}"),
        ("rack.session", "{b80}--{h40}"),
        ("ASP.NET_SessionId", "{l24}"),
        (".AspNetCore.Session", "CfDJ8{u100}"),
        ("session", "eyJ1c2VyX2lkIjo0Mn0.{u6}.{u27}"),
        ("_gitlab_session", "{h32}"),
        ("remember_token", "{d4}|{h64}"),
        ("auth_token", "{u40}"),
    ):
        secret = render(shape, f"cookie-{cookie}")
        out.append(
            Format(
                f"{cookie} cookie",
                "cookie",
                "password",
                secret,
                "",
                (
                    (f"{cookie} Set-Cookie", f"Set-Cookie: {cookie}=", "; Path=/; HttpOnly\r\n"),
                    (f"{cookie} Cookie", f"Cookie: lang=en; {cookie}=", "\r\n"),
                ),
            )
        )
    out.append(
        Format(
            "Azure Functions key in ?code=",
            "azure-functions",
            "password",
            fake("azfunc", 54, URLSAFE) + "==",
            "",
            (
                ("function URL", "https://acme.azurewebsites.net/api/ingest?code=", "&clientId=x"),
                ("function URL end", "curl https://f.azurewebsites.net/api/h?code=", ""),
            ),
        )
    )
    out.append(
        Format(
            "API key in a query string",
            "query",
            "password",
            fake("querykey", 32, HEX),
            "",
            (
                ("api_key param", "GET https://api.acme.io/v2/items?api_key=", "&page=2"),
                ("access_token param", "https://graph.acme.io/me?access_token=", " 401"),
            ),
        )
    )
    return out


_PASSWORDS: Final = _passwords()


# --- key material ----------------------------------------------------------------------------
def _lines(label: str, n: int, width: int = 64, alphabet: str = B64) -> list[str]:
    return [fake(f"{label}{i}", width, alphabet) for i in range(n)]


def _key(name: str, family: str, head: str, body: list[str], foot: str, pre: str = "") -> Format:
    text = head + "\n" + pre + "\n".join(body) + "\n" + foot
    return Format(name, family, "key", text, "", (), tuple(body))


def _keys() -> list[Format]:
    keys: list[Format] = []
    for kind in ("RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED ", ""):
        label = f"pem-{kind or 'pkcs8'}"
        keys.append(
            _key(
                f"PEM {kind or 'PKCS#8 '}private key",
                "pem",
                f"-----BEGIN {kind}PRIVATE KEY-----",
                _lines(label, 8),
                f"-----END {kind}PRIVATE KEY-----",
            )
        )
    keys.append(
        _key(
            "PEM encrypted RSA key (Proc-Type)",
            "pem",
            "-----BEGIN RSA PRIVATE KEY-----",
            _lines("pem-proc", 6),
            "-----END RSA PRIVATE KEY-----",
            pre="Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
            + fake("iv", 32, HEX.upper())
            + "\n\n",
        )
    )
    keys.append(
        _key(
            "PGP private key block",
            "pgp",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
            _lines("pgp", 8),
            "=" + fake("pgpcrc", 4, B64) + "\n-----END PGP PRIVATE KEY BLOCK-----",
        )
    )
    keys.append(
        _key(
            "SSH.com (SECSH) private key",
            "secsh",
            '---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "rsa-key-20260101"',
            _lines("secsh", 8, 70),
            "---- END SSH2 ENCRYPTED PRIVATE KEY ----",
        )
    )
    keys.append(
        _key(
            "OpenVPN static key",
            "openvpn",
            "#\n# 2048 bit OpenVPN static key\n#\n-----BEGIN OpenVPN Static key V1-----",
            _lines("ovpn", 16, 32, HEX),
            "-----END OpenVPN Static key V1-----",
        )
    )
    keys.append(
        _key(
            "PuTTY private key",
            "putty",
            "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: deploy\nPublic-Lines: 1\n"
            "AAAAB3NzaC1yc2EAAAADAQABAAABAQC7\nPrivate-Lines: 4",
            _lines("ppk", 4),
            "Private-MAC: " + fake("ppkmac", 64, HEX),
        )
    )
    keys.append(
        Format(
            "minisign secret key",
            "minisign",
            "key",
            "untrusted comment: minisign encrypted secret key\nRWRTY0Iy"
            + fake("minisign", 204, B64)
            + "=",
            "",
            (),
            ("RWRTY0Iy" + fake("minisign", 204, B64)[:40],),
        )
    )
    keys.append(
        Format(
            "WireGuard private key",
            "wireguard",
            "key",
            "[Interface]\nAddress = 10.8.0.2/24\nPrivateKey = "
            + (wg := fake("wg", 43, B64) + "=")
            + "\nListenPort = 51820",
            "",
            (),
            (wg,),
        )
    )
    sa_id = fake("sa-key-id", 40, HEX)
    keys.append(
        Format(
            "service account private_key_id",
            "gcp-sa",
            "key",
            '{\n  "type": "service_account",\n  "project_id": "acme-prod",\n'
            f'  "private_key_id": "{sa_id}",\n'
            '  "client_email": "ci@acme-prod.iam.gserviceaccount.com"'
            "\n}",
            "",
            (),
            (sa_id,),
        )
    )
    return keys


_KEYS: Final = _keys()

FORMATS: Final[list[Format]] = [*_TOKENS, *_KEYED, *_PASSWORDS, *_KEYS]


def _held_out(family: str) -> bool:
    return hashlib.blake2b(family.encode(), digest_size=2).digest()[0] % 5 == 0


HELD_OUT: Final = frozenset(f.family for f in FORMATS if _held_out(f.family))
"""The families (a fifth, by a hash of their name) whose formats the rules were not written
against."""


# --- contexts --------------------------------------------------------------------------------
class Planted(NamedTuple):
    """One secret planted in one context: ``fragments`` must all be gone from the redacted
    text (a token's or password's every 12-character window, a key's lines)."""

    format: str
    family: str
    kind: str
    context: str
    text: str
    fragments: tuple[str, ...]

    @property
    def held_out(self) -> bool:
        return self.family in HELD_OUT


def _windows(secret: str, width: int = 12) -> tuple[str, ...]:
    if len(secret) <= width:
        return (secret,)
    return tuple(secret[i : i + width] for i in range(0, len(secret) - width + 1))


def _vendor(f: Format) -> str:
    return f.family.replace("-", " ").title().replace(" ", "")


def _camel(env: str) -> str:
    head, *rest = env.lower().split("_")
    return head + "".join(w.title() for w in rest)


def _escaped(text: str) -> str:
    """A tool's output as a transcript line holds it: JSON-escaped, inside a JSON object."""
    return json.dumps({"type": "tool_result", "tool_use_id": "toolu_01", "content": text})[:-1]


def _token_contexts(f: Format) -> list[tuple[str, str]]:
    s, env, vendor = f.secret, f.env, _vendor(f)
    contexts = [
        ("export", f"$ export {env}={s}\n$ ./deploy.sh\n"),
        ("dotenv", f"# .env\nDEBUG=false\n{env}={s}\nPORT=8080\n"),
        (
            "json_config",
            f'{{\n  "region": "eu-west-1",\n  "{_camel(env)}": "{s}",\n  "retries": 3\n}}',
        ),
        (
            "yaml_config",
            f"{f.family}:\n  endpoint: https://api.example.com\n  {env.lower()}: {s}\n",
        ),
        ("neutral_json_key", f'{{"id": 7, "value": "{s}", "enabled": true}}'),
        (
            "custom_header",
            f"GET /v1/me HTTP/1.1\r\nHost: api.example.com\r\nX-{vendor}-Auth: {s}\r\n",
        ),
        ("curl", f"curl -sS https://api.example.com/v1/me -H 'Authorization: Bearer {s}' | jq ."),
        (
            "stack_trace",
            'Traceback (most recent call last):\n  File "/app/client.py", line 42, in connect\n'
            "    raise AuthError(msg)\n"
            f"client.errors.AuthError: 401 Unauthorized: credential {s} was rejected\n",
        ),
        (
            "url_userinfo",
            f"$ git remote set-url origin https://oauth2:{s}@git.example.com/team/app.git",
        ),
        ("prose", f"Here is the key I made this morning: {s} - it expires next week."),
        ("json_escaped", _escaped(f"$ cat .env\nDEBUG=1\n{env}={s}\nPORT=80\n")),
    ]
    if f.hidden:  # a URL is not a header's value or a URL's password
        return [c for c in contexts if c[0] not in ("custom_header", "curl", "url_userinfo")]
    return contexts


def _keyed_contexts(f: Format) -> list[tuple[str, str]]:
    s, env, vendor = f.secret, f.env, _vendor(f)
    return [
        ("export", f"$ export {env}={s}\n$ ./deploy.sh\n"),
        ("dotenv", f"# .env\nDEBUG=false\n{env}={s}\nPORT=8080\n"),
        (
            "json_config",
            f'{{\n  "region": "eu-west-1",\n  "{_camel(env)}": "{s}",\n  "retries": 3\n}}',
        ),
        (
            "yaml_config",
            f"{f.family}:\n  endpoint: https://api.example.com\n  {env.lower()}: {s}\n",
        ),
        ("custom_header", f"X-{vendor}-Api-Key: {s}\r\nAccept: application/json\r\n"),
        ("curl", f'curl -H "X-{vendor}-Token: {s}" https://api.example.com/v2/items'),
        ("query", f"GET https://api.example.com/v2/items?api_key={s}&limit=10 200"),
        (
            "stack_trace",
            'Traceback (most recent call last):\n  File "/app/main.py", line 7, in <module>\n'
            f'    client = {vendor}Client(api_key="{s}")\nConnectionError: timed out\n',
        ),
        ("json_escaped", _escaped(f"$ cat .env\nDEBUG=1\n{env}={s}\nPORT=80\n")),
    ]


def _key_contexts(f: Format) -> list[tuple[str, str, tuple[str, ...]]]:
    text = f.secret
    frags = f.fragments
    out = [("raw", f"$ cat key\n{text}\n$ ls\n", frags)]
    if len(frags) > 2:  # a block of lines: cut, BEGIN cut off, escaped, indented
        cut = text[: text.index(frags[-2]) + 20]
        out.append(("cut", f"$ head -c 600 key\n{cut}", frags[:-2]))
        no_begin = text[text.index(frags[1]) :]
        out.append(("begin_cut_off", f"...{no_begin}\n", frags[1:]))
        out.append(("json_escaped_cut", _escaped(f"$ cat sa.json\n{cut}"), frags[:-2]))
        out.append(("yaml_indented", "tls:\n  key: |\n    " + text.replace("\n", "\n    "), frags))
    out.append(("json_escaped", _escaped(f"$ cat key\n{text}\n"), frags))
    return out


def planted() -> list[Planted]:
    """Every format in every context of its kind."""
    out: list[Planted] = []
    for f in FORMATS:
        if f.kind in ("token", "keyed"):
            contexts = _token_contexts(f) if f.kind == "token" else _keyed_contexts(f)
            frags = _windows(f.hidden or f.secret)
            for context, text in contexts:
                out.append(Planted(f.name, f.family, f.kind, context, text, frags))
        elif f.kind == "password":
            for _, before, after in f.lines:
                text = before + f.secret + after
                out.append(
                    Planted(f.name, f.family, f.kind, "command_or_config", text, _windows(f.secret))
                )
                out.append(
                    Planted(
                        f.name, f.family, f.kind, "json_escaped", _escaped(text), _windows(f.secret)
                    )
                )
        else:
            for context, text, frags in _key_contexts(f):
                out.append(Planted(f.name, f.family, f.kind, context, text, frags))
    return out
