// A room's file tree: listed once with the files API, then kept current by
// the room's watch stream (…/sandbox/watch, read with fetch so that it can
// carry the token; resumed with Last-Event-ID after a break, listed again
// on "overflow").  Upload (button or drop) and download per file.

import { api, request, readEvents, roomPath, filesPath, download, formatBytes, h, ApiError } from "./api.js";

const ROOT = "/workspace";

const parentOf = (p) => p.slice(0, p.lastIndexOf("/")) || "/";
const nameOf = (p) => p.slice(p.lastIndexOf("/") + 1);

export class FileTree {
	constructor(host, roomId, { setStatus, toast }) {
		this.host = host;
		this.roomId = roomId;
		this.setStatus = setStatus;
		this.toast = toast;
		this.entries = new Map();          // absolute path -> {type, size, modifiedAt}
		this.open = new Set([ROOT]);       // expanded directories
		this.selected = null;
		this.lastEventId = null;
		this.closed = false;
		this.refreshDirs = new Set();
		this.build();
	}

	build() {
		this.input = h("input.file-input", { type: "file", multiple: true, id: "upload-input", tabindex: "-1",
			onchange: () => { this.upload([...this.input.files]); this.input.value = ""; } });
		this.list = h("div.tree", { role: "tree", id: "file-tree" });
		this.watchState = h("span.watch-state", { title: "the watch stream" }, "");
		this.host.replaceChildren(
			h("div.pane-head",
				h("span.pane-title", "Explorer"),
				this.watchState,
				h("span.spacer"),
				h("button.icon", { title: "Upload files to the selected folder", id: "upload-button",
					onclick: () => this.input.click() }, "⇪"),
				h("button.icon", { title: "New folder", onclick: () => this.mkdir() }, "+"),
				h("button.icon", { title: "List again", onclick: () => this.reload() }, "↻"),
				this.input),
			this.list);
		this.list.addEventListener("dragover", (e) => { e.preventDefault(); this.list.classList.add("drop"); });
		this.list.addEventListener("dragleave", () => this.list.classList.remove("drop"));
		this.list.addEventListener("drop", (e) => {
			e.preventDefault();
			this.list.classList.remove("drop");
			this.upload([...e.dataTransfer.files]);
		});
	}

	async start() {
		await this.reload();
		this.watch();
	}

	async reload() {
		try {
			const r = await api("GET", filesPath(this.roomId, ROOT) + "?recursive=1");
			this.entries.clear();
			for (const e of r.entries) {
				this.entries.set(ROOT + "/" + e.relativePath, { type: e.type, size: e.size, modifiedAt: e.modifiedAt });
			}
			this.truncated = !!r.truncated;
		} catch (e) {
			if (!(e instanceof ApiError && e.status === 404)) this.toast(e.message, "error");
		}
		this.render();
	}

	// Re-lists the directories whose entries changed, for sizes and times
	// (a watch event says what changed, not how big it is now).
	scheduleRefresh(dir) {
		this.refreshDirs.add(dir);
		clearTimeout(this.refreshTimer);
		this.refreshTimer = setTimeout(async () => {
			const dirs = [...this.refreshDirs];
			this.refreshDirs.clear();
			for (const d of dirs) {
				if (d !== ROOT && !this.entries.has(d)) continue;
				try {
					const r = await api("GET", filesPath(this.roomId, d));
					for (const e of r.entries) {
						const p = d + "/" + e.name;
						const old = this.entries.get(p);
						if (old) Object.assign(old, { type: e.type, size: e.size, modifiedAt: e.modifiedAt });
					}
				} catch { /* gone again: the watch will say */ }
			}
			this.render();
		}, 150);
	}

	async watch() {
		let delay = 500;
		while (!this.closed) {
			this.ctl = new AbortController();
			try {
				const headers = { Accept: "text/event-stream" };
				if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
				const r = await request("GET", roomPath(this.roomId) +
					"/sandbox/watch?path=" + encodeURIComponent(ROOT) + "&recursive=1",
					{ headers, signal: this.ctl.signal });
				this.showWatch("live");
				delay = 500;
				await readEvents(r, (e) => {
					if (e.id) this.lastEventId = e.id;
					this.apply(e.data);
				});
			} catch (e) {
				if (this.closed) return;
				if (e instanceof ApiError && e.status === 401) return;
				if (e instanceof ApiError && e.status === 404 && /^room /.test(e.message)) {
					this.showWatch("room gone");   // deleted: nothing to come back to
					return;
				}
			}
			if (this.closed) return;
			this.showWatch("reconnecting");
			await new Promise((res) => setTimeout(res, delay));
			delay = Math.min(delay * 2, 8000);
		}
	}

	showWatch(state) {
		this.watchState.textContent = state === "live" ? "● live" : "○ " + state;
		this.watchState.className = "watch-state " + state;
		this.host.dataset.watch = state;
	}

	apply(ev) {
		switch (ev.type) {
		case "create":
			this.entries.set(ev.path, { type: ev.isDir ? "directory" : "file", size: null });
			this.scheduleRefresh(parentOf(ev.path));
			break;
		case "modify":
			this.scheduleRefresh(parentOf(ev.path));
			return;
		case "delete":
			this.remove(ev.path);
			break;
		case "move": {
			const moved = [];
			for (const [p, v] of this.entries) {
				if (p === ev.path || p.startsWith(ev.path + "/")) moved.push([p, v]);
			}
			this.remove(ev.path);
			for (const [p, v] of moved) this.entries.set(ev.to + p.slice(ev.path.length), v);
			if (!moved.length) this.entries.set(ev.to, { type: ev.isDir ? "directory" : "file", size: null });
			this.scheduleRefresh(parentOf(ev.to));
			break;
		}
		case "overflow":
			this.reload();
			return;
		case "end":
			return;   // the stream closes; watch() comes back
		default:
			return;
		}
		this.render();
	}

	remove(path) {
		for (const p of [...this.entries.keys()]) {
			if (p === path || p.startsWith(path + "/")) this.entries.delete(p);
		}
	}

	targetDir() {
		if (!this.selected) return ROOT;
		const e = this.entries.get(this.selected);
		return e && e.type === "directory" ? this.selected : parentOf(this.selected);
	}

	async upload(files) {
		const dir = this.targetDir();
		for (const f of files) {
			const path = dir + "/" + f.name;
			this.setStatus("uploading " + path);
			try {
				await request("PUT", filesPath(this.roomId, path), { body: f,
					headers: { "Content-Type": "application/octet-stream" } });
				this.toast("uploaded " + path + " (" + formatBytes(f.size) + ")");
			} catch (e) {
				this.toast(path + ": " + e.message, "error");
			}
		}
		this.setStatus("");
	}

	async mkdir() {
		const name = prompt("New folder in " + this.targetDir());
		if (!name) return;
		try {
			await request("PUT", filesPath(this.roomId, this.targetDir() + "/" + name) + "/");
		} catch (e) { this.toast(e.message, "error"); }
	}

	async remove_(path) {
		if (!confirm("Delete " + path + "?")) return;
		try {
			await request("DELETE", filesPath(this.roomId, path) + "?recursive=1");
		} catch (e) { this.toast(e.message, "error"); }
	}

	render() {
		const children = new Map();
		for (const p of this.entries.keys()) {
			const parent = parentOf(p);
			if (!children.has(parent)) children.set(parent, []);
			children.get(parent).push(p);
		}
		const isDir = (p) => (this.entries.get(p) || {}).type === "directory";
		const rows = [];
		const walk = (dir, depth) => {
			const kids = (children.get(dir) || []).sort((a, b) =>
				(isDir(b) - isDir(a)) || nameOf(a).localeCompare(nameOf(b)));
			for (const p of kids) {
				const e = this.entries.get(p);
				const dirRow = e.type === "directory";
				const open = this.open.has(p);
				const row = h("div.row", {
					role: "treeitem", tabindex: "-1",
					dataset: { path: p, type: e.type },
					class: "row" + (p === this.selected ? " selected" : ""),
					style: `padding-left:${8 + depth * 14}px`,
					onclick: () => {
						this.selected = p;
						if (dirRow) { if (open) this.open.delete(p); else this.open.add(p); }
						this.render();
					},
					ondblclick: () => { if (!dirRow) download(this.roomId, p).catch((err) => this.toast(err.message, "error")); },
				},
				h("span.twisty", dirRow ? (open ? "▾" : "▸") : ""),
				h("span.ficon." + (dirRow ? "dir" : e.type === "symlink" ? "link" : "file"), ""),
				h("span.name", nameOf(p)),
				h("span.size", dirRow ? "" : formatBytes(e.size)),
				dirRow ? null : h("button.icon.dl", { title: "Download " + nameOf(p), "aria-label": "download",
					onclick: (ev) => { ev.stopPropagation(); download(this.roomId, p).catch((err) => this.toast(err.message, "error")); } }, "⇩"),
				h("button.icon.rm", { title: "Delete " + nameOf(p), "aria-label": "delete",
					onclick: (ev) => { ev.stopPropagation(); this.remove_(p); } }, "×"));
				rows.push(row);
				if (dirRow && open) walk(p, depth + 1);
			}
		};
		walk(ROOT, 0);
		if (!rows.length) rows.push(h("div.empty-note", "/workspace is empty. Drop files here to upload."));
		if (this.truncated) rows.push(h("div.empty-note", "(listing truncated)"));
		this.list.replaceChildren(h("div.row.root", { dataset: { path: ROOT, type: "directory" },
			class: "row root" + (this.selected === ROOT || !this.selected ? " selected" : ""),
			onclick: () => { this.selected = ROOT; this.render(); } },
		h("span.twisty", "▾"), h("span.ficon.dir", ""), h("span.name", "workspace")), ...rows);
	}

	dispose() {
		this.closed = true;
		if (this.ctl) this.ctl.abort();
		clearTimeout(this.refreshTimer);
	}
}
