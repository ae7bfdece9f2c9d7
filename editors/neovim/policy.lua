-- Converge policy files in Neovim: filetype, comments, and `policyc lsp`
-- (diagnostics, hover, go to definition, references, rename, completion,
-- outline, formatting). Needs Neovim 0.8 or later and `policyc` on $PATH
-- (or set `cmd` to its full path). Put this file in ~/.config/nvim/plugin/
-- or paste it into your init.lua. See docs/editors.md.

vim.filetype.add({ extension = { policy = "policy" } })

vim.api.nvim_create_autocmd("FileType", {
  pattern = "policy",
  callback = function(args)
    vim.bo[args.buf].commentstring = "// %s"
    vim.bo[args.buf].shiftwidth = 2
    vim.bo[args.buf].expandtab = true
    local marker = vim.fs.find({ ".git" }, { upward = true, path = vim.fs.dirname(args.file) })[1]
    vim.lsp.start({
      name = "policyc",
      cmd = { "policyc", "lsp" },
      root_dir = marker and vim.fs.dirname(marker) or vim.fs.dirname(args.file),
    })
  end,
})

-- Format on save with the same code as `policyc fmt`:
vim.api.nvim_create_autocmd("BufWritePre", {
  pattern = "*.policy",
  callback = function() vim.lsp.buf.format({ name = "policyc" }) end,
})
