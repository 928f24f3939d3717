package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/dispatcher"
	"github.com/sluicehq/sluice/raftkv"
	"github.com/valyala/fasthttp"
)

// The endpoints of replica membership: anyone who reads may list the
// replicas; only an admin changes them.
var (
	epMembers = map[string]endpoint{"GET": {readers, (*Handler).listMembers}, "POST": {admins, (*Handler).addMember}}
	epMember  = map[string]endpoint{"DELETE": {admins, (*Handler).removeMember}}
)

// maxMemberBody is the most an AddMemberRequest's body may be.
const maxMemberBody = 4 << 10

// peerURL returns the HTTP base URL of replica id: the one replicated
// with its membership (raftkv's Member.Meta), else HandlerConfig.PeerHTTP's.
func (h *Handler) peerURL(id uint64) (string, bool) {
	for _, m := range h.cfg.Raft.Status().Members {
		if m.ID == id && m.Meta != "" {
			return m.Meta, true
		}
	}
	u, ok := h.cfg.PeerHTTP[id]
	return u, ok
}

// memberURL returns the HTTP base URL of member m: its replicated one, else
// HandlerConfig.PeerHTTP's.
func (h *Handler) memberURL(m raftkv.Member) string {
	if m.Meta != "" {
		return m.Meta
	}
	return h.cfg.PeerHTTP[m.ID]
}

// memberList is the replica's view of the membership.
func (h *Handler) memberList() api.MemberList {
	st := h.cfg.Raft.Status()
	out := api.MemberList{Leader: st.Leader, Members: make([]api.Member, 0, len(st.Members))}
	for _, m := range st.Members {
		out.Members = append(out.Members, api.Member{ID: m.ID, RaftAddr: m.Addr, URL: h.memberURL(m), Learner: m.Learner, Leader: m.ID == st.Leader})
	}
	return out
}

// listMembers serves GET /v1/members (query: consistent).
func (h *Handler) listMembers(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	if e := checkQuery(ctx, "consistent"); e != nil {
		return e
	}
	if e := h.consistent(ctx); e != nil {
		return e
	}
	writeJSON(ctx, fasthttp.StatusOK, h.memberList())
	return nil
}

// addMember serves POST /v1/members: the new replica joins as a learner,
// catches up (up to api.MemberAddWait) and is made a voter. The same
// request for a replica that is still a learner at the same address
// resumes where an earlier one stopped.
func (h *Handler) addMember(ctx *fasthttp.RequestCtx, _ Principal, _ []string) *httpError {
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	var req api.AddMemberRequest
	if e := h.decodeStrict(ctx, "member", &req); e != nil {
		return e
	}
	if probs := memberProblems(req); len(probs) > 0 {
		return invalid(probs, "member: %s", probs[0].Message)
	}
	st := h.cfg.Raft.Status()
	resume := false
	for _, m := range st.Members {
		switch {
		case m.ID == h.id && m.Addr == "":
			return errorf(fasthttp.StatusConflict, api.CodeConflict,
				"add replica %d: this replica has no raft address (a single replica started without --peers); restart it with --peers %d=HOST:PORT to add replicas", req.ID, h.id)
		case m.ID == req.ID && m.Learner && m.Addr == req.RaftAddr && sameURL(m.Meta, req.URL):
			resume = true
		case m.ID == req.ID:
			return errorf(fasthttp.StatusConflict, api.CodeConflict, "add replica %d: replica %d is a member already (raft address %s)", req.ID, m.ID, m.Addr)
		case m.Addr == req.RaftAddr:
			return errorf(fasthttp.StatusConflict, api.CodeConflict, "add replica %d: raft address %s is replica %d's", req.ID, req.RaftAddr, m.ID)
		}
		if m.ID != req.ID && sameURL(h.memberURL(m), req.URL) {
			return errorf(fasthttp.StatusConflict, api.CodeConflict, "add replica %d: URL %s is replica %d's", req.ID, req.URL, m.ID)
		}
	}
	op := fmt.Sprintf("add replica %d", req.ID)
	pctx, cancel := context.WithTimeout(h.base, dispatcher.DefaultProposeTimeout)
	defer cancel()
	if !resume {
		m := raftkv.Member{ID: req.ID, Addr: req.RaftAddr, Meta: strings.TrimSuffix(req.URL, "/"), Learner: true}
		if err := h.cfg.Raft.AddMember(pctx, m); err != nil {
			return h.memberError(ctx, op, err)
		}
		h.log.Info("server: replica added as a learner", "replica", req.ID, "raft_addr", req.RaftAddr, "url", req.URL)
	}
	wctx, wcancel := context.WithTimeout(h.base, api.MemberAddWait)
	defer wcancel()
	if err := h.cfg.Raft.CatchUp(wctx, req.ID); err != nil {
		if errors.Is(err, raftkv.ErrTimeout) {
			return unavailable("%s: it was added as a learner but has not caught up with the log within %v (is it running, started with --join, and can the replicas reach %s?); the same add resumes, or remove it",
				op, api.MemberAddWait, req.RaftAddr)
		}
		return h.memberError(ctx, op, err)
	}
	pctx2, cancel2 := context.WithTimeout(h.base, dispatcher.DefaultProposeTimeout)
	defer cancel2()
	if err := h.cfg.Raft.PromoteMember(pctx2, req.ID); err != nil {
		return h.memberError(ctx, op+": make it a voter", err)
	}
	h.log.Info("server: replica is a voter", "replica", req.ID)
	writeJSON(ctx, fasthttp.StatusOK, h.memberList())
	return nil
}

// removeMember serves DELETE /v1/members/{id}. Asked to remove itself, the
// leader hands its leadership to another voter first and answers 307 to
// it, so that the cluster never waits out an election for it.
func (h *Handler) removeMember(ctx *fasthttp.RequestCtx, _ Principal, args []string) *httpError {
	id, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil || id == 0 {
		return invalid([]api.Problem{{Item: -1, Path: "id", Message: "want a replica ID (a positive integer)"}},
			"remove replica %q: not a replica ID (a positive integer)", clip(args[0], 40))
	}
	if e := h.requireLeader(ctx); e != nil {
		return e
	}
	if e := checkQuery(ctx); e != nil {
		return e
	}
	op := fmt.Sprintf("remove replica %d", id)
	st := h.cfg.Raft.Status()
	var voters []uint64
	member := false
	for _, m := range st.Members {
		member = member || m.ID == id
		if !m.Learner && m.ID != id {
			voters = append(voters, m.ID)
		}
	}
	switch {
	case !member:
		return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "%s: it is not a member", op)
	case len(voters) == 0:
		return errorf(fasthttp.StatusConflict, api.CodeConflict, "%s: it is the last voter; a cluster keeps at least one", op)
	}
	pctx, cancel := context.WithTimeout(h.base, dispatcher.DefaultProposeTimeout)
	defer cancel()
	if id == h.id {
		// To the live voter with the most of the log.
		if err := h.cfg.Raft.TransferLeadership(pctx, 0); err != nil {
			return h.memberError(ctx, op+": hand the leadership over first", err)
		}
		to := h.cfg.Raft.Status().Leader
		h.log.Info("server: leadership handed over to remove this replica", "replica", h.id, "leader", to)
		return h.leaderError(ctx, to)
	}
	if err := h.cfg.Raft.RemoveMember(pctx, id); err != nil {
		return h.memberError(ctx, op, err)
	}
	h.log.Info("server: replica removed", "replica", id)
	writeJSON(ctx, fasthttp.StatusOK, h.memberList())
	return nil
}

// memberError maps an error of a membership change to a reply.
func (h *Handler) memberError(ctx *fasthttp.RequestCtx, op string, err error) *httpError {
	msg := func() string { return clip(strings.ReplaceAll(err.Error(), "raftkv: ", ""), 300) }
	switch {
	case errors.Is(err, raftkv.ErrMemberExists), errors.Is(err, raftkv.ErrLastVoter), errors.Is(err, raftkv.ErrQuorumAtRisk):
		return errorf(fasthttp.StatusConflict, api.CodeConflict, "%s: %s", op, msg())
	case errors.Is(err, raftkv.ErrNotMember):
		return errorf(fasthttp.StatusNotFound, api.CodeNotFound, "%s: %s", op, msg())
	case errors.Is(err, raftkv.ErrBadAddress):
		return invalid([]api.Problem{{Item: -1, Path: "raft_addr", Message: msg()}}, "%s: %s", op, msg())
	case errors.Is(err, raftkv.ErrMembershipPending):
		return unavailable("%s: another membership change is still being applied; retry", op)
	}
	return h.fromError(ctx, op, err)
}

// memberProblems checks an AddMemberRequest's fields.
func memberProblems(req api.AddMemberRequest) []api.Problem {
	var probs []api.Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, api.Problem{Item: -1, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if req.ID == 0 {
		add("id", "want a replica ID (a positive integer)")
	}
	if msg := hostPortProblem(req.RaftAddr); msg != "" {
		add("raft_addr", "%q: %s", clip(req.RaftAddr, 100), msg)
	}
	if len(checkPeerHTTP(map[uint64]string{req.ID: req.URL})) > 0 {
		add("url", "%q: want http(s)://host:port", clip(req.URL, 100))
	}
	return probs
}

// hostPortProblem says what is wrong with a replica's raft address, which
// the others dial: host:port with a named or numeric host other than the
// unspecified one, and a port from 1 to 65535. "" when nothing is.
func hostPortProblem(a string) string {
	host, port, err := net.SplitHostPort(a)
	switch {
	case err != nil:
		return "want host:port"
	case host == "" || strings.ContainsAny(host, " /?#@"):
		return "want a host name or IP address before the port"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "an unspecified address (0.0.0.0, ::) names no one the other replicas can dial"
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return "want a port from 1 to 65535"
	}
	return ""
}

// sameURL reports whether two base URLs name the same place, a trailing
// slash and the case of scheme and host aside.
func sameURL(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ua, err1 := url.Parse(strings.TrimSuffix(a, "/"))
	ub, err2 := url.Parse(strings.TrimSuffix(b, "/"))
	if err1 != nil || err2 != nil {
		return a == b
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host) && ua.Path == ub.Path
}
