// Package video decodes camera frames of LeRobot datasets.
//
// A LeRobot v3 dataset stores each camera (a "video" feature of info.json)
// in mp4 files holding many episodes; the episodes index gives, per episode
// and camera, the file and the episode's time range in it. The frame of a
// sample with timestamp t of episode e is the frame at from_timestamp(e) + t
// of that file, matched within a tolerance (LeRobotDataset's tolerance_s).
//
// Decoder is the one interface: it decodes one segment of one file
// sequentially from one seek and hands back frames with their exact
// presentation timestamps. FFmpeg implements it with the ffmpeg executable
// (no cgo; plain go build works without FFmpeg, which is needed only when
// frames are requested). Select matches a segment's sample timestamps to
// decoded frames with LeRobot's nearest-within-tolerance rule. See
// docs/video.md.
package video
