package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The paths of the dispatcher's replica membership.
const (
	// PathMembers: GET lists the dispatcher replicas as the replica asked
	// sees them (MemberList; role reader); POST adds one (AddMemberRequest;
	// role admin) and answers the MemberList once it votes.
	PathMembers = "/v1/members"
	// PathMember is PathMembers + "/{id}": DELETE removes replica id (role
	// admin) and answers the MemberList without it. Asked to remove the
	// leader, the leader first hands its leadership to another voter and
	// answers 307 to it, which removes it.
	PathMember = "/v1/members/"
)

// MemberAddWait is the longest a dispatcher waits for a new replica to
// catch up with the log before it makes it a voter. A replica that has not
// caught up by then stays a learner (it receives the log, does not vote);
// the same add again resumes.
const MemberAddWait = time.Minute

// Member is one dispatcher replica of the cluster.
type Member struct {
	// ID is the replica's raft ID.
	ID uint64 `json:"id"`
	// RaftAddr is the host:port its raft transport listens on.
	RaftAddr string `json:"raft_addr"`
	// URL is the base URL of its HTTP API, where the others redirect
	// writes when it leads; empty when unknown (an initial replica
	// started without --peer-http).
	URL string `json:"url,omitempty"`
	// Learner: it receives the log but does not vote yet.
	Learner bool `json:"learner,omitempty"`
	// Leader: it leads, as the replica asked knows.
	Leader bool `json:"leader,omitempty"`
}

// MemberList lists the replicas by ID.
type MemberList struct {
	// Leader is the leader's ID; 0 when none is known.
	Leader  uint64   `json:"leader"`
	Members []Member `json:"members"`
}

// AddMemberRequest adds a dispatcher replica: started with --join, empty,
// listening for raft at RaftAddr and serving its API at URL.
type AddMemberRequest struct {
	// ID is the new replica's raft ID: positive and never used before in
	// this cluster.
	ID uint64 `json:"id"`
	// RaftAddr is its raft address, host:port.
	RaftAddr string `json:"raft_addr"`
	// URL is its HTTP API's base URL, http(s)://host:port.
	URL string `json:"url"`
}

// Members lists the dispatcher replicas, as the replica that answers sees
// them.
func (c *Client) Members(ctx context.Context) (MemberList, error) {
	var out MemberList
	_, err := c.doJSON(ctx, &request{method: http.MethodGet, path: PathMembers}, &out)
	return out, err
}

// AddMember adds a dispatcher replica to the cluster and returns the
// members once it votes: it waits while the replica catches up, up to
// MemberAddWait. An error leaves the change's outcome to be checked with
// Members, as for any write that is not repeatable.
func (c *Client) AddMember(ctx context.Context, req AddMemberRequest) (MemberList, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return MemberList{}, fmt.Errorf("api: add member: encode: %w", err)
	}
	var out MemberList
	_, err = c.doJSON(ctx, &request{method: http.MethodPost, path: PathMembers, body: body,
		contentType: "application/json", wait: MemberAddWait}, &out)
	return out, err
}

// RemoveMember removes dispatcher replica id from the cluster and returns
// the members left.
func (c *Client) RemoveMember(ctx context.Context, id uint64) (MemberList, error) {
	var out MemberList
	_, err := c.doJSON(ctx, &request{method: http.MethodDelete, path: PathMember + strconv.FormatUint(id, 10)}, &out)
	return out, err
}
