// continuity: archive opencode's sessions as they happen (installed by `continuity install opencode`).
//
// opencode has no command hooks; this plugin is the hook. On a session's events it runs
// `continuity hook <event> --agent opencode --session <id>` in the background (the ingest of that
// session, through the hook dispatch: no command-line stack to start): detached, its output
// discarded, never awaited, so no turn waits for it and nothing it does can fail the session.
// The ingest reads opencode's own database (read-only) and archives what is new; running it
// twice archives nothing twice.
//
// - session.idle, session.compacted, session.error: at once (a turn ended, or opencode compacted;
//   `opencode run` may exit right after, so nothing is left waiting for a timer);
// - message.updated, tool.execute.after: debounced (one run a few seconds after the last one).
// - experimental.session.compacting: adds one line to what opencode's compaction summary is
//   built from, naming the archive's thread, so the summary points back at the full history
//   (which the continuity MCP server's `search` and `read` tools give back).
// - experimental.chat.messages.transform (opencode calls it with the messages it is about to send
//   to the model, the latest compaction's summary first): after a compaction, continuity's
//   restore of what that compaction dropped goes into the first user message after the summary,
//   as Claude Code gets it after its own. It is asked for once per compaction and process
//   (`continuity hook restore`, awaited at most RESTORE_TIMEOUT_MS: without it the turn goes on).
//
// CONTINUITY-OPENCODE-PLUGIN v1 (this marker tells `continuity uninstall opencode` the file is ours)

import { spawn } from "node:child_process"

const COMMAND = /*COMMAND*/ ["continuity"] /*END*/
const STORE = /*STORE*/ null /*END*/
const DEBOUNCE_MS = 3000
const RESTORE_TIMEOUT_MS = 20000

export const ContinuityPlugin = async () => {
  const timers = new Map()

  const ingest = (sessionID, event = "session-event") => {
    const pending = timers.get(sessionID)
    if (pending) clearTimeout(pending)
    timers.delete(sessionID)
    try {
      const env = { ...process.env }
      if (STORE) env.CONTINUITY_HOME = STORE
      const child = spawn(
        COMMAND[0],
        [...COMMAND.slice(1), "hook", event, "--agent", "opencode", "--session", sessionID],
        { detached: true, stdio: "ignore", env },
      )
      child.on("error", () => {})
      child.unref()
    } catch {
      // never fail the session: the next event (or `continuity ingest --agent opencode`) catches up
    }
  }

  const env = () => {
    const env = { ...process.env }
    if (STORE) env.CONTINUITY_HOME = STORE
    return env
  }

  // the restore of each compaction (by its summary message), asked for once in this process
  const restores = new Map()
  const restoreOf = (sessionID, summaryID) => {
    if (!restores.has(summaryID)) {
      restores.set(
        summaryID,
        new Promise((resolve) => {
          let out = ""
          let child
          const timer = setTimeout(() => {
            try {
              child?.kill()
            } catch {}
            resolve("")
          }, RESTORE_TIMEOUT_MS)
          try {
            child = spawn(
              COMMAND[0],
              [...COMMAND.slice(1), "hook", "restore", "--agent", "opencode", "--session", sessionID],
              { stdio: ["ignore", "pipe", "ignore"], env: env() },
            )
            child.stdout.setEncoding("utf8")
            child.stdout.on("data", (d) => (out += d))
            child.on("error", () => {
              clearTimeout(timer)
              resolve("")
            })
            child.on("close", () => {
              clearTimeout(timer)
              resolve(out.trim())
            })
          } catch {
            clearTimeout(timer)
            resolve("")
          }
        }),
      )
    }
    return restores.get(summaryID)
  }

  const later = (sessionID) => {
    if (!sessionID) return
    const pending = timers.get(sessionID)
    if (pending) clearTimeout(pending)
    const timer = setTimeout(() => ingest(sessionID), DEBOUNCE_MS)
    if (typeof timer?.unref === "function") timer.unref()
    timers.set(sessionID, timer)
  }

  return {
    event: async ({ event }) => {
      const props = event?.properties ?? {}
      const sessionID = props.sessionID ?? props.info?.sessionID
      if (!sessionID) return
      if (event.type === "session.idle" || event.type === "session.compacted" || event.type === "session.error") {
        ingest(sessionID, event.type)
      } else if (event.type === "message.updated") {
        later(sessionID)
      }
    },
    "tool.execute.after": async (input) => {
      later(input?.sessionID)
    },
    "experimental.chat.messages.transform": async (_input, output) => {
      try {
        const messages = output?.messages
        if (!Array.isArray(messages)) return
        let at = -1
        for (let i = messages.length - 1; i >= 0; i--) {
          const info = messages[i]?.info
          if (info?.role === "assistant" && info?.summary === true) {
            at = i
            break
          }
        }
        if (at < 0) return
        const summary = messages[at].info
        const target = messages.slice(at + 1).find((m) => m?.info?.role === "user" && Array.isArray(m.parts))
        if (!target || !summary.sessionID) return
        const text = await restoreOf(summary.sessionID, summary.id)
        if (!text || target.parts.some((p) => p?.continuity === summary.id)) return
        target.parts.push({
          id: `prt_continuity_${summary.id}`,
          sessionID: summary.sessionID,
          messageID: target.info.id,
          type: "text",
          text,
          synthetic: true,
          continuity: summary.id,
        })
      } catch {
        // never fail the turn: the model goes without the restore
      }
    },
    "experimental.session.compacting": async (input, output) => {
      if (!input?.sessionID || !Array.isArray(output?.context)) return
      output.context.push(
        `This session is archived in full by continuity as thread oc-${input.sessionID}: ` +
          "whatever this summary leaves out can be found again with the continuity MCP tools " +
          "(search, read).",
      )
    },
  }
}
