// The room's tabs other than the terminal: commands with live output,
// managed processes and their logs, preview ports, and messages (with the
// agent's answer as it streams, where a model is configured).

import { api, request, readEvents, execStream, roomPath, formatBytes, ago, h } from "./api.js";

const stamp = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "");

// ---------------------------------------------------------------- commands

export class CommandsPanel {
	constructor(host, roomId, ui) {
		this.roomId = roomId;
		this.ui = ui;
		this.input = h("input.cmd-input#cmd-input", { placeholder: "Command, run by /bin/sh -c in the room (Enter to run)",
			spellcheck: "false", autocomplete: "off" });
		this.asRoot = h("input", { type: "checkbox", id: "cmd-root" });
		this.runs = h("div.runs#runs");
		const form = h("form.toolbar", { onsubmit: (e) => { e.preventDefault(); this.run(); } },
			h("span.prompt", "$"), this.input,
			h("label.check", this.asRoot, "root"),
			h("button.primary#cmd-run", { type: "submit" }, "Run"));
		host.replaceChildren(form, this.runs,
			h("div.empty-note.runs-empty", "Commands you run here appear with their output as it comes."));
	}

	async run() {
		const cmd = this.input.value.trim();
		if (!cmd) return;
		this.input.value = "";
		const out = h("pre.output");
		const status = h("span.badge.running", "running");
		const took = h("span.muted", "");
		const card = h("div.run", { dataset: { state: "running" } },
			h("div.run-head", h("code.run-cmd", "$ " + cmd), h("span.spacer"), took, status), out);
		this.runs.prepend(card);
		const t0 = performance.now();
		const add = (text, cls) => {
			const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
			out.append(cls ? h("span." + cls, text) : text);
			if (atEnd) out.scrollTop = out.scrollHeight;
		};
		const body = { cmd };
		if (this.asRoot.checked) body.user = "root";
		try {
			await execStream(this.roomId, body, (e) => {
				if (e.type === "stdout") add(e.data);
				else if (e.type === "stderr") add(e.data, "stderr");
				else if (e.type === "complete") {
					const r = e.result;
					const ok = r.exitCode === 0;
					status.textContent = r.timedOut ? "timed out" : "exit " + r.exitCode;
					status.className = "badge " + (ok ? "ok" : "bad");
					card.dataset.state = "done";
					card.dataset.exit = r.exitCode;
					const ms = r.duration != null ? r.duration : performance.now() - t0;
					took.textContent = ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(2) + " s";
				} else if (e.type === "error") {
					add(e.error + "\n", "stderr");
					status.textContent = "error";
					status.className = "badge bad";
					card.dataset.state = "done";
				}
			});
		} catch (e) {
			add(e.message + "\n", "stderr");
			status.textContent = "failed";
			status.className = "badge bad";
			card.dataset.state = "done";
		}
		this.ui.roomsChanged();
	}

	show() { this.input.focus(); }
	dispose() {}
}

// ---------------------------------------------------------------- processes

export class ProcessesPanel {
	constructor(host, roomId, ui) {
		this.roomId = roomId;
		this.ui = ui;
		this.base = roomPath(roomId) + "/sandbox/processes";
		this.name = h("input#proc-name", { placeholder: "name (optional)", spellcheck: "false", size: 14 });
		this.cmd = h("input.cmd-input#proc-cmd", { placeholder: "Command to keep running, e.g. python3 -m http.server 8000", spellcheck: "false" });
		this.table = h("tbody#proc-rows");
		this.logHead = h("div.log-head", "Select a process to follow its output.");
		this.log = h("pre.output.log#proc-log");
		host.replaceChildren(
			h("form.toolbar", { onsubmit: (e) => { e.preventDefault(); this.start(); } },
				this.name, this.cmd, h("button.primary#proc-start", { type: "submit" }, "Start")),
			h("div.split",
				h("div.table-wrap", h("table.grid",
					h("thead", h("tr", h("th", "id"), h("th", "status"), h("th", "pid"), h("th", "command"),
						h("th", "started"), h("th", ""))), this.table)),
				h("div.log-pane", this.logHead, this.log)));
	}

	async refresh() {
		let r;
		try { r = await api("GET", this.base); } catch (e) { r = { processes: [] }; if (e.status !== 404) this.ui.toast(e.message, "error"); }
		const rows = r.processes.slice().reverse().map((p) => h("tr", {
			dataset: { id: p.id, status: p.status }, class: p.id === this.following ? "selected" : null,
			onclick: () => this.follow(p.id) },
		h("td.mono", p.id),
		h("td", h("span.badge." + (p.status === "running" ? "running" : p.exitCode === 0 ? "ok" : "bad"),
			p.status + (p.status !== "running" && p.exitCode != null ? " " + p.exitCode : ""))),
		h("td.mono", p.pid ?? ""),
		h("td.mono.cmdcell", { title: p.command }, p.command),
		h("td.muted", ago(p.startTime)),
		h("td.right", p.status === "running"
			? h("button.small", { onclick: (e) => { e.stopPropagation(); this.stop(p.id); } }, "Stop") : "")));
		this.table.replaceChildren(...rows);
		if (!rows.length) this.table.append(h("tr", h("td.empty-note", { colspan: 6 }, "No processes yet.")));
	}

	async start() {
		const cmd = this.cmd.value.trim();
		if (!cmd) return;
		const body = { cmd };
		if (this.name.value.trim()) body.name = this.name.value.trim();
		try {
			const r = await api("POST", this.base, { json: body });
			this.cmd.value = "";
			this.name.value = "";
			await this.refresh();
			this.follow(r.process.id);
		} catch (e) { this.ui.toast(e.message, "error"); }
		this.ui.roomsChanged();
	}

	async stop(id) {
		try { await api("DELETE", this.base + "/" + encodeURIComponent(id) + "?signal=TERM"); }
		catch (e) { this.ui.toast(e.message, "error"); }
		this.refresh();
	}

	async follow(id) {
		if (this.logCtl) this.logCtl.abort();
		const ctl = this.logCtl = new AbortController();
		this.following = id;
		this.log.replaceChildren();
		this.log.dataset.process = id;
		this.logHead.replaceChildren(h("span", "Output of "), h("code", id), h("span.muted", " (live)"));
		this.refresh();
		const add = (text, cls) => {
			const atEnd = this.log.scrollTop + this.log.clientHeight >= this.log.scrollHeight - 4;
			this.log.append(cls ? h("span." + cls, text) : text);
			if (atEnd) this.log.scrollTop = this.log.scrollHeight;
		};
		try {
			const r = await request("GET", this.base + "/" + encodeURIComponent(id) + "/logs",
				{ headers: { Accept: "text/event-stream" }, signal: ctl.signal });
			await readEvents(r, ({ data: e }) => {
				if (e.type === "stdout") add(e.data);
				else if (e.type === "stderr") add(e.data, "stderr");
				else if (e.type === "exit") {
					const nl = this.log.textContent && !this.log.textContent.endsWith("\n") ? "\n" : "";
					add(`${nl}[${e.status}${e.exitCode != null ? ", exit " + e.exitCode : ""}${e.signal ? ", " + e.signal : ""}]\n`, "note");
					this.logHead.lastChild.textContent = " (ended)";
					this.refresh();
				}
			});
		} catch (e) {
			if (!ctl.signal.aborted) add(e.message + "\n", "stderr");
		}
	}

	show() { this.refresh(); this.timer = setInterval(() => this.refresh(), 4000); }
	hide() { clearInterval(this.timer); }
	dispose() { this.hide(); if (this.logCtl) this.logCtl.abort(); }
}

// ---------------------------------------------------------------- ports

export class PortsPanel {
	constructor(host, roomId, ui) {
		this.roomId = roomId;
		this.ui = ui;
		this.base = roomPath(roomId) + "/sandbox/ports";
		this.port = h("input#port-input.port-input", { type: "number", min: 1, max: 65535, placeholder: "port, e.g. 8000" });
		this.table = h("tbody#port-rows");
		host.replaceChildren(
			h("form.toolbar", { onsubmit: (e) => { e.preventDefault(); this.expose(); } },
				this.port, h("button.primary#port-expose", { type: "submit" }, "Expose"),
				h("span.muted.hint", "A server listening on the room's loopback gets a preview URL that needs no token.")),
			h("div.table-wrap", h("table.grid",
				h("thead", h("tr", h("th", "port"), h("th", "preview"), h("th", ""))), this.table)));
	}

	async refresh() {
		let r;
		try { r = await api("GET", this.base); } catch (e) { r = { ports: [] }; if (e.status !== 404) this.ui.toast(e.message, "error"); }
		const rows = r.ports.map((p) => h("tr", { dataset: { port: p.port } },
			h("td.mono", String(p.port)),
			h("td", h("a.preview-link", { href: p.url, target: "_blank", rel: "noopener noreferrer" }, p.url)),
			h("td.right", h("button.small", { onclick: () => this.unexpose(p.port) }, "Unexpose"))));
		this.table.replaceChildren(...rows);
		if (!rows.length) this.table.append(h("tr", h("td.empty-note", { colspan: 3 }, "No exposed ports.")));
	}

	async expose() {
		const port = parseInt(this.port.value, 10);
		if (!port) return;
		try {
			await api("POST", this.base, { json: { port } });
			this.port.value = "";
		} catch (e) { this.ui.toast(e.message, "error"); }
		this.refresh();
	}

	async unexpose(port) {
		try { await api("DELETE", this.base + "/" + port); } catch (e) { this.ui.toast(e.message, "error"); }
		this.refresh();
	}

	show() { this.refresh(); }
	dispose() {}
}

// ---------------------------------------------------------------- messages

export class MessagesPanel {
	constructor(host, roomId, ui) {
		this.roomId = roomId;
		this.ui = ui;
		this.base = roomPath(roomId) + "/messages";
		this.list = h("div.messages#messages");
		this.text = h("textarea#msg-input", { rows: 3, placeholder: "Message (Ctrl+Enter to send). As the assistant, <run>cmd</run> runs cmd in the room." });
		this.role = h("select#msg-role", h("option", { value: "user" }, "user"), h("option", { value: "assistant" }, "assistant"));
		this.text.addEventListener("keydown", (e) => {
			if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); this.send(); }
		});
		host.replaceChildren(this.list,
			h("form.composer", { onsubmit: (e) => { e.preventDefault(); this.send(); } },
				this.text, h("div.composer-side", this.role, h("button.primary#msg-send", { type: "submit" }, "Send"))));
	}

	bubble(m) {
		return h("div.msg." + m.role, { dataset: { id: m.id || "", role: m.role } },
			h("div.msg-head", h("span.role", m.role), h("span.muted", stamp(m.createdAt))),
			h("div.msg-body", m.content));
	}

	async refresh() {
		let r;
		try { r = await api("GET", this.base); } catch (e) { r = { messages: [] }; if (e.status !== 404) this.ui.toast(e.message, "error"); }
		this.list.replaceChildren(...r.messages.map((m) => this.bubble(m)));
		if (!r.messages.length) this.list.append(h("div.empty-note", "No messages in this room yet."));
		this.list.scrollTop = this.list.scrollHeight;
	}

	async send() {
		const content = this.text.value;
		if (!content.trim()) return;
		this.text.value = "";
		const role = this.role.value;
		const pending = this.bubble({ role, content, createdAt: new Date().toISOString() });
		pending.classList.add("pending");
		this.list.querySelector(".empty-note")?.remove();
		this.list.append(pending);
		let reply = null;
		try {
			const r = await request("POST", this.base, { json: { role, content }, headers: { Accept: "text/event-stream" } });
			if ((r.headers.get("Content-Type") || "").includes("event-stream")) {
				await readEvents(r, ({ data: e }) => {
					if (!reply && (e.type === "token" || e.type === "run")) {
						reply = this.bubble({ role: "assistant", content: "", createdAt: new Date().toISOString() });
						reply.classList.add("pending");
						this.list.append(reply);
					}
					const body = reply && reply.querySelector(".msg-body");
					if (e.type === "token") body.append(e.data);
					else if (e.type === "run") body.append(h("div.run-note", "▶ " + e.cmd));
					else if (e.type === "output") body.append(h("pre.output.small", e.summary));
					else if (e.type === "error") this.ui.toast(e.error, "error");
				});
			} else {
				await r.json();
			}
		} catch (e) { this.ui.toast(e.message, "error"); }
		await this.refresh();
		this.ui.roomsChanged();
	}

	show() { this.refresh(); this.text.focus(); }
	dispose() {}
}

export { formatBytes };
